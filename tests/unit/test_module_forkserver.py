"""scripts/module_forkserver.py: a module process handed to the fork server
behaves as the process Ansible started would (its streams, arguments,
working directory, environment, exit status and signals), anything else runs
the ordinary way, and the suite's own ansible runs go through it."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ansible_cli import FORKSERVER_ENV, REPO, ansible_env, module_forkserver

forkserver = pytest.importorskip("mlinfra_module_forkserver", reason="scripts/setup.sh installs it")

# What a module process sees, as JSON on stdout; a line of stderr; exit 7.
PROBE = r"""
import json, os, sys
import kubernetes.config.kube_config as kube_config
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "parent": open("/proc/%d/cmdline" % os.getppid()).read(),
                  "answer": os.environ.get("ANSWER"), "kubeconfig": kube_config.KUBE_CONFIG_DEFAULT_LOCATION,
                  "stdin": sys.stdin.readline().strip(), "path0": sys.path[0]}))
sys.stderr.write("to stderr\n")
if len(sys.argv) > 1 and sys.argv[1] == "sleep":
    open(sys.argv[2], "w").write(str(os.getpid()))
    import time
    time.sleep(60)
sys.exit(7)
"""


@pytest.fixture(scope="module")
def server_dir():
    directory = module_forkserver()
    if directory == "0":
        pytest.skip("the fork server is off (%s=0)" % FORKSERVER_ENV)
    return directory


def write_probe(directory, name="AnsiballZ_probe.py"):
    path = os.path.join(str(directory), name)
    with open(path, "w") as handle:
        handle.write(PROBE)
    return path


def run_probe(script, server_dir, cwd, *args):
    env = dict(os.environ, ANSWER="42", KUBECONFIG="/nowhere/kubeconfig")
    env[FORKSERVER_ENV] = server_dir
    return subprocess.run([sys.executable, script] + list(args), input="from stdin\n", cwd=str(cwd), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60,
                          check=False)


def test_a_module_process_runs_in_a_copy_of_the_server_as_it_would_alone(tmp_path, server_dir):
    script = write_probe(tmp_path)
    served = run_probe(script, server_dir, tmp_path, "--flag")
    seen = json.loads(served.stdout)
    assert "mlinfra_module_forkserver" in seen["parent"]
    alone = run_probe(script, "0", tmp_path, "--flag")
    ordinary = json.loads(alone.stdout)
    assert "mlinfra_module_forkserver" not in ordinary["parent"]
    for key in ("argv", "cwd", "answer", "kubeconfig", "stdin", "path0"):
        assert seen[key] == ordinary[key], key
    assert seen["kubeconfig"] == "/nowhere/kubeconfig"
    assert seen["answer"] == "42" and seen["stdin"] == "from stdin"
    assert served.stderr == alone.stderr == "to stderr\n"
    assert served.returncode == alone.returncode == 7


def test_other_scripts_and_interpreters_without_a_server_run_the_ordinary_way(tmp_path, server_dir):
    not_a_module = write_probe(tmp_path, "probe.py")
    assert "mlinfra_module_forkserver" not in json.loads(run_probe(not_a_module, server_dir, tmp_path).stdout)["parent"]
    async_wrapper = write_probe(tmp_path, "AnsiballZ_async_wrapper.py")
    assert "mlinfra_module_forkserver" not in json.loads(run_probe(async_wrapper, server_dir, tmp_path).stdout)["parent"]
    no_server = tmp_path / "none"
    no_server.mkdir()
    ran = run_probe(write_probe(tmp_path), str(no_server), tmp_path)
    assert ran.returncode == 7 and "mlinfra_module_forkserver" not in json.loads(ran.stdout)["parent"]


def test_a_signal_to_the_module_process_reaches_its_copy(tmp_path, server_dir):
    script, pid_file = write_probe(tmp_path), tmp_path / "pid"
    env = dict(os.environ, **{FORKSERVER_ENV: server_dir})
    client = subprocess.Popen([sys.executable, script, "sleep", str(pid_file)], cwd=str(tmp_path), env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    copy = int(pid_file.read_text())
    assert copy != client.pid
    client.send_signal(signal.SIGTERM)
    # The copy dies of the signal and the client reports it as failed.
    assert client.wait(timeout=30) != 0
    deadline = time.monotonic() + 10
    while os.path.exists("/proc/%d" % copy) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists("/proc/%d" % copy)


def test_the_suites_ansible_runs_use_it():
    shell = "tr '\\0' ' ' < /proc/$(ps -o ppid= -p $PPID | tr -d ' ')/cmdline"

    def parent_of_module(env):
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-c", "local",
                               "-e", "ansible_python_interpreter=%s" % sys.executable, "-m", "ansible.builtin.shell",
                               "-a", shell], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    if ansible_env()[FORKSERVER_ENV] == "0":
        pytest.skip("the fork server is off")
    assert "mlinfra_module_forkserver" in parent_of_module(ansible_env())
    assert "mlinfra_module_forkserver" not in parent_of_module(ansible_env(**{FORKSERVER_ENV: "0"}))
