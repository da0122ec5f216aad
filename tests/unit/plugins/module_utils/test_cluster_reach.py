"""cluster_reach: the first contact with the API server is bounded and says
what happened. The servers are real sockets on 127.0.0.1: one that accepts
and never answers (a black hole, as a stalled proxy or an overloaded API
server behaves), a port where nothing listens, and a plain HTTP server that
answers /version as an API server does, or refuses the credentials."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster import reach as cluster_reach

pytestmark = pytest.mark.skipif(not cluster_reach.HAS_KUBERNETES, reason="needs the kubernetes library")


def kubeconfig(tmp_path, server):
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        "clusters: [{name: c, cluster: {server: \"%s\", insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: not-a-real-token}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n" % server)
    return str(path)


@pytest.fixture
def black_hole():
    """A port that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except socket.timeout:
                continue
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


@pytest.fixture
def api_server():
    """An HTTP server answering /version with ``status`` (200: a version),
    and a read of a namespace with what ``namespaces`` gives for its name
    (404 for a name it does not give)."""
    answer = {"status": 200, "namespaces": {}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            status = answer["status"]
            if self.path.startswith("/api/v1/namespaces/"):
                status = answer["namespaces"].get(self.path.rsplit("/", 1)[1], 404)
            body = json.dumps({"gitVersion": "v1.34.4", "major": "1", "minor": "34"} if self.path.rstrip("/") == "/version"
                              and status == 200 else {"kind": "Status", "code": status}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], answer
    server.shutdown()
    server.server_close()


def test_a_server_that_never_answers_fails_within_the_timeout_naming_it(tmp_path, black_hole):
    server = "https://127.0.0.1:%d" % black_hole
    config = cluster_reach.configuration({"kubeconfig": kubeconfig(tmp_path, server)})
    began = time.monotonic()
    with pytest.raises(cluster_reach.ReachError) as raised:
        cluster_reach.reach(config, 2)
    # No retry: one request, bounded as a whole (connection and TLS included).
    assert time.monotonic() - began < 5
    assert str(raised.value).startswith("the API server at %s did not answer within 2 s (cluster_api_timeout)" % server)
    assert "Raise cluster_api_timeout" in str(raised.value)


def test_a_port_where_nothing_listens_is_a_refused_connection(tmp_path):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
    server = "https://127.0.0.1:%d" % closed.getsockname()[1]
    try:
        config = cluster_reach.configuration({"kubeconfig": kubeconfig(tmp_path, server)})
        with pytest.raises(cluster_reach.ReachError) as raised:
            cluster_reach.reach(config, 5)
    finally:
        closed.close()
    assert str(raised.value) == ("the API server at %s refused the connection: is it running, and is the "
                                 "kubeconfig's server address right?" % server)


def test_an_answering_server_gives_its_version_and_refused_credentials_are_said(tmp_path, api_server):
    port, answer = api_server
    server = "http://127.0.0.1:%d" % port
    config = cluster_reach.configuration({"kubeconfig": kubeconfig(tmp_path, server)})
    reached = cluster_reach.reach(config, 5)
    assert reached["server"] == server and reached["version"] == "v1.34.4" and reached["seconds"] < 5
    answer["status"] = 401
    with pytest.raises(cluster_reach.ReachError) as raised:
        cluster_reach.reach(cluster_reach.configuration({"kubeconfig": kubeconfig(tmp_path, server)}), 5)
    assert "answered 401" in str(raised.value) and "log in again" in str(raised.value)


def test_the_namespace_is_read_by_the_same_client_and_a_refusal_is_said(tmp_path, api_server):
    port, answer = api_server
    server = "http://127.0.0.1:%d" % port
    answer["namespaces"] = {"team-a": 200, "secret": 403}
    config = cluster_reach.configuration({"kubeconfig": kubeconfig(tmp_path, server)})
    assert cluster_reach.namespace_exists(config, "team-a", 5) is True
    assert cluster_reach.namespace_exists(config, "team-b", 5) is False
    with pytest.raises(cluster_reach.ReachError) as raised:
        cluster_reach.namespace_exists(config, "secret", 5)
    assert str(raised.value).startswith("the API server at %s answered 403 " % server)
    assert "may not read namespaces" in str(raised.value) and "ask for get on namespaces" in str(raised.value)


def test_a_missing_kubeconfig_is_said_before_any_request(tmp_path):
    with pytest.raises(cluster_reach.ReachError) as raised:
        cluster_reach.configuration({"kubeconfig": str(tmp_path / "nothing-here")})
    assert str(raised.value).startswith("no usable kubeconfig: ")


def test_deploy_against_a_server_that_never_answers_stops_at_once_in_one_line(tmp_path, black_hole):
    """deploy.yml on the local inventory, its kubeconfig pointed at the
    black hole: the play fails at its first contact with the API, within
    cluster_api_timeout, saying which server and what to do, and no task
    that would read or change the cluster runs after it."""
    from ansible_cli import run_playbook
    server = "https://127.0.0.1:%d" % black_hole
    config = kubeconfig(tmp_path, server)
    run = run_playbook("deploy.yml", "local", {"cluster_kubeconfig": config, "cluster_api_timeout": 3}, timeout=120)
    assert run.failed
    reach_task = "Reach the cluster's API within cluster_api_timeout and read whether the namespace exists"
    reached = run.results(reach_task)
    assert reached and reached[0]["failed"] and reached[0]["server"] == server
    said = run.last_words().strip()
    assert "\n" not in said
    assert said.startswith("cannot reach the API of cluster 'local': the API server at %s did not answer "
                           "within 3 s (cluster_api_timeout)" % server)
    assert "the kubeconfig is %s" % config in said
    ran = run.tasks_run()
    assert ran[ran.index(reach_task) + 1:] == ["Fail in one line when the API does not answer"]
