"""Running the collection through the ansible and ansible-playbook CLIs, for the tests."""

import atexit
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from doc_commands import doc_command
from kubernetes import client

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.path.dirname(sys.executable)

# pytest-xdist workers run side by side, each with a local cluster of its own
# (tests/integration/conftest.py). The fake pods of every cluster are
# processes of this machine on 127.0.0.1, so each worker but the first gets
# rendezvous and benchmark ports of its own for the local inventory.
_WORKER_INDEX = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
LOCAL_PORTS = {} if _WORKER_INDEX == 0 else {
    "statefulset_rendezvous_port": 29500 + 100 * _WORKER_INDEX,
    "train_rdzv_port": 29500 + 100 * _WORKER_INDEX,
    "verify_bench_port": 29511 + 100 * _WORKER_INDEX,
}


def _json_document(stdout, stderr):
    # ansible.cfg enables a timing callback that prints lines around the JSON
    # document of the json stdout callback.
    start = stdout.find("\n{")
    start = 0 if stdout.startswith("{") else start + 1
    assert start >= 0 and stdout[start:start + 1] == "{", stdout + stderr
    return json.JSONDecoder().raw_decode(stdout[start:])[0]


# The module processes of the ansible runs below are forked from a server of
# this pytest process (scripts/module_forkserver.py, which scripts/setup.sh
# installs): it imports ansible's module_utils and the kubernetes client once
# instead of once per task. MLINFRA_MODULE_FORKSERVER=0 turns it off.
FORKSERVER_ENV = "MLINFRA_MODULE_FORKSERVER"
_forkserver = {}


def module_forkserver():
    """The socket directory of this process's module fork server, started on
    first use; "0" when it is off or cannot start (the modules then run the
    ordinary way)."""
    if os.environ.get(FORKSERVER_ENV) == "0":
        return "0"
    if "directory" not in _forkserver:
        _forkserver["directory"] = _start_forkserver()
    return _forkserver["directory"]


def _start_forkserver():
    try:
        import mlinfra_module_forkserver as forkserver
    except ImportError:
        return "0"
    directory = tempfile.mkdtemp(prefix="mlinfra-mfs-")
    env = dict(os.environ)
    env.pop(FORKSERVER_ENV, None)
    # A session of its own: the server and any module copy still running are
    # stopped together when this process ends.
    server = subprocess.Popen([sys.executable, "-m", "mlinfra_module_forkserver", directory], cwd=REPO, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    atexit.register(_stop_forkserver, server, directory)
    deadline = time.monotonic() + 30
    while not os.path.exists(forkserver.socket_path(directory)):
        if server.poll() is not None or time.monotonic() > deadline:
            return "0"
        time.sleep(0.05)
    return directory


def _stop_forkserver(server, directory):
    try:
        os.killpg(server.pid, signal.SIGTERM)
    except OSError:
        pass
    server.wait()
    shutil.rmtree(directory, ignore_errors=True)


def ansible_env(**extra):
    env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_NOCOLOR="1")
    env[FORKSERVER_ENV] = module_forkserver()
    env.update(extra)
    return env


def run_module(module, args, check=False):
    """Run one module of the collection on localhost through the ansible CLI; its result."""
    cmd = [os.path.join(BIN, "ansible"), "localhost", "-c", "local",
           "-e", "ansible_python_interpreter=%s" % sys.executable,
           "-m", "mlinfra.multinode." + module, "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    with _timed(module):
        proc = subprocess.run(cmd, cwd=REPO, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=300, check=False)
    return _json_document(proc.stdout, proc.stderr)["plays"][0]["tasks"][0]["hosts"]["localhost"]


class PlaybookRun:
    """The outcome of one ansible-playbook run, from the json callback."""

    def __init__(self, returncode, document, stderr, stdout=""):
        self.returncode, self.document, self.stderr, self.stdout = returncode, document, stderr, stdout
        self.stats = document["stats"].get("localhost", {})

    @property
    def failed(self):
        return self.returncode != 0

    @property
    def changed(self):
        return self.stats.get("changed", 0)

    def results(self, task_name):
        """Results of the tasks whose name contains task_name."""
        found = []
        for play in self.document["plays"]:
            for task in play["tasks"]:
                if task_name in task["task"]["name"]:
                    found.append(task["hosts"]["localhost"])
        return found

    def task_paths(self):
        """Where each task that ran is written (file:line), in their order."""
        return [task["task"].get("path", "") for play in self.document["plays"] for task in play["tasks"]]

    def tasks_run(self):
        """The names of the tasks that ran (not skipped), in their order,
        without their role's name ("verify : ")."""
        return [task["task"]["name"].split(" : ", 1)[-1] for play in self.document["plays"] for task in play["tasks"]
                if not task["hosts"].get("localhost", {}).get("skipped")]

    def last_words(self):
        """The message of the last task that printed one (skipped tasks print
        none): what the user reads last, just above the play recap."""
        said = None
        for play in self.document["plays"]:
            for task in play["tasks"]:
                result = task["hosts"].get("localhost", {})
                if not result.get("skipped") and "msg" in result:
                    said = result["msg"]
        return said

    def failure_messages(self):
        messages = []
        for play in self.document["plays"]:
            for task in play["tasks"]:
                result = task["hosts"].get("localhost", {})
                if result.get("failed") and not result.get("ignore_errors") and task["task"]["name"]:
                    messages.append(result.get("msg", ""))
                    for item in result.get("results", []):
                        if item.get("failed") or item.get("evaluated_to") is False:
                            # A module that crashed says why in its stderr
                            # or traceback, not in msg.
                            messages.append(item.get("msg") or (item.get("module_stderr") or item.get("exception")
                                                                or json.dumps(item))[-2000:])
        return messages


def playbook_command(playbook, inventory, extra_vars=None, check=False, tags=None, collection=REPO):
    """``collection``: the copy of the collection whose playbook runs (an
    installed tarball's, collection_tarball.py); the inventory is this
    checkout's either way."""
    cmd = [os.path.join(BIN, "ansible-playbook"), os.path.join(collection, "playbooks", playbook),
           "-i", os.path.join(REPO, "inventories", inventory)]
    if inventory == "local" and LOCAL_PORTS:
        extra_vars = dict(LOCAL_PORTS, **(extra_vars or {}))
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    if check:
        cmd.append("--check")
    if tags:
        cmd += ["--tags", tags]
    return cmd


def run_playbook(playbook, inventory, extra_vars=None, check=False, tags=None, timeout=900, installed=None):
    """``installed``: run the playbook of an installed tarball
    (collection_tarball.install_tarball's result) with its settings."""
    cmd = playbook_command(playbook, inventory, extra_vars, check, tags,
                           collection=installed["root"] if installed else REPO)
    env = ansible_env(ANSIBLE_CONFIG=installed["config"]) if installed else ansible_env()
    with _timed(playbook):
        proc = subprocess.run(cmd, cwd=installed["directory"] if installed else REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=timeout, check=False)
    return PlaybookRun(proc.returncode, _json_document(proc.stdout, proc.stderr), proc.stderr, proc.stdout)


@contextlib.contextmanager
def playbook_in_background(playbook, inventory, extra_vars=None, timeout=900):
    """Starts ansible-playbook and yields a function that waits for it to end
    and returns its PlaybookRun: for tests that act on the cluster while a
    playbook runs. The process is killed if the test leaves early."""
    cmd = playbook_command(playbook, inventory, extra_vars)
    with _timed(playbook):
        proc = subprocess.Popen(cmd, cwd=REPO, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True)

        def finish():
            stdout, stderr = proc.communicate(timeout=timeout)
            return PlaybookRun(proc.returncode, _json_document(stdout, stderr), stderr, stdout)

        try:
            yield finish
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


SHIPPED_INVENTORIES = sorted(name for name in os.listdir(os.path.join(REPO, "inventories"))
                             if name != "template" and os.path.isdir(os.path.join(REPO, "inventories", name)))


def doc_command_run(text, inventory="local", inventory_values=None, **chosen):
    """What runs one command of README.md or docs/quickstart.md as written
    (doc_commands.py): ``text`` is the command as a document shows it,
    ``chosen`` the options it offers that the run takes up, with their
    values. ``inventory_values`` are what the test's inventory holds
    (the namespace a test is given, the nodes it runs on, where reports go):
    given as extra variables, they may not name what the command shows.
    Returns (the command, its playbook_command arguments)."""
    command = doc_command(text)
    assert inventory in command.inventories(SHIPPED_INVENTORIES), (text, inventory)
    shown = set(command.required) | set(command.optional)
    assert not shown & set(inventory_values or {}), "%r shows %s: give it as chosen" % (
        text, ", ".join(sorted(shown & set(inventory_values))))
    extra_vars = dict(inventory_values or {}, **command.extra_vars(chosen))
    return command, dict(playbook=command.playbook, inventory=inventory, extra_vars=extra_vars, check=command.check)


def assert_ends_as_documented(command, run):
    """The last line the user reads (the verdict block's) matches the one
    the document shows for the command, when it shows one."""
    pattern = command.last_line_pattern()
    last = run.stdout.rstrip().splitlines()[-1] if run.stdout.strip() else ""
    last = last.split(": ", 1)[1] if last.startswith(("- ", "FAILED ")) and ": " in last else last
    if pattern is None:
        return
    assert pattern.match(last), "%r ends with %r, not as docs/quickstart.md shows it: %r" % (
        command.text, last, command.ends_with)


def run_doc_command(text, inventory="local", inventory_values=None, timeout=900, installed=None, **chosen):
    """Runs a command of the documents as written (doc_command_run) and
    checks its last line against the one the document shows; its PlaybookRun.
    ``installed``: as run_playbook's."""
    command, arguments = doc_command_run(text, inventory, inventory_values, **chosen)
    run = run_playbook(timeout=timeout, installed=installed, **arguments)
    assert_ends_as_documented(command, run)
    return run


@contextlib.contextmanager
def doc_command_in_background(text, inventory="local", inventory_values=None, timeout=900, **chosen):
    """playbook_in_background for a command of the documents as written."""
    command, arguments = doc_command_run(text, inventory, inventory_values, **chosen)
    with playbook_in_background(arguments["playbook"], inventory, arguments["extra_vars"], timeout) as finish:
        def finish_as_documented():
            run = finish()
            assert_ends_as_documented(command, run)
            return run
        yield finish_as_documented


@contextlib.contextmanager
def _timed(what):
    """With MLINFRA_TEST_TIMES naming a file, one JSON line per ansible run
    (the test, what ran, its wall and CPU seconds) is appended to it: where
    the suite's time goes, run by run (docs/PERFORMANCE.md)."""
    path = os.environ.get("MLINFRA_TEST_TIMES")
    if not path:
        yield
        return
    wall, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        yield
    finally:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        record = {"test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0], "run": what,
                  "wall": round(time.monotonic() - wall, 2),
                  "cpu": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)}
        with open(path, "a") as handle:
            handle.write(json.dumps(record) + "\n")


def remove_namespace(api_client, namespace):
    """A test's clean-up: what a deployment made outside its namespace (the
    SR-IOV networks that serve it, its ClusterRole and SCC, named after the
    namespace) deleted through the API, then the namespace, with all it
    holds. teardown.yml, which does the same and more (it keeps what it is
    not asked to purge), costs about 20 s of CPU a run; its own tests run it
    (test_deploy.py, test_sriov.py, test_image.py)."""
    core = client.CoreV1Api(api_client)
    try:
        core.read_namespace(namespace)
    except client.ApiException as err:
        assert err.status == 404
        return
    custom = client.CustomObjectsApi(api_client)
    for network in custom.list_cluster_custom_object("sriovnetwork.openshift.io", "v1", "sriovnetworks")["items"]:
        if network.get("spec", {}).get("networkNamespace") == namespace:
            _gone(custom.delete_namespaced_custom_object, "sriovnetwork.openshift.io", "v1",
                  network["metadata"]["namespace"], "sriovnetworks", network["metadata"]["name"])
    rbac = client.RbacAuthorizationV1Api(api_client)
    for role in rbac.list_cluster_role().items:
        if role.metadata.name.startswith(namespace + "-"):
            _gone(rbac.delete_cluster_role, role.metadata.name)
    for scc in custom.list_cluster_custom_object("security.openshift.io", "v1", "securitycontextconstraints")["items"]:
        if scc["metadata"]["name"].startswith(namespace + "-"):
            _gone(custom.delete_cluster_custom_object, "security.openshift.io", "v1", "securitycontextconstraints",
                  scc["metadata"]["name"])
    # The namespace controller starts on a deleted namespace only after five
    # seconds (namespaceDeletionGracePeriod in kube-controller-manager), then
    # waits out the pods' grace period (30 s for the StatefulSet's) in steps:
    # waiting for the namespace to go made each clean-up 5 to 16 s. What the
    # next test needs gone is the pods, which hold their nodes' GPUs: once
    # the namespace is terminating nothing can make new ones, and its pods go
    # at once; the rest goes on its own (every test has a namespace of its
    # own). teardown.yml's own tests delete the graceful way and wait.
    _gone(core.delete_namespace, namespace)
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    deadline = time.monotonic() + 180
    while core.list_namespaced_pod(namespace).items:
        assert time.monotonic() < deadline, "pods of namespace %s were still there 180 s after it was deleted" % namespace
        time.sleep(0.2)


def _gone(delete, *args):
    """Delete; an object already gone is fine."""
    try:
        delete(*args)
    except client.ApiException as err:
        assert err.status == 404, err


@contextlib.contextmanager
def deployment(api_client, prefix, nodes, extra=None):
    """deploy.yml of the local inventory in a fresh namespace on `nodes`
    (with `extra` variables); afterwards removed with its namespace
    (remove_namespace). Yields the extra variables that name the
    deployment."""
    settings = dict(extra or {}, cluster_namespace="%s-%s" % (prefix, uuid.uuid4().hex[:6]), cluster_gpu_nodes=nodes)
    try:
        # Removed even when deploy.yml failed: what it made by then (the
        # SriovNetworks that serve the namespace above all) would refuse the
        # next deployment of the same NIC names on this cluster.
        run = run_playbook("deploy.yml", "local", settings)
        assert not run.failed, run.failure_messages()
        yield settings
    finally:
        remove_namespace(api_client, settings["cluster_namespace"])
