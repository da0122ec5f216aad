# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Run one command in many pods at once and collect what each returned.

Used on the controller (it needs the kubernetes Python client, as
kubernetes.core does), by the pods_exec module.
"""

from __future__ import absolute_import, division, print_function

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

try:
    import yaml
    from kubernetes import client as k8s_client
    from kubernetes.client.rest import ApiException
    from kubernetes.stream import stream
    IMPORT_ERROR = None
except ImportError as err:  # reported by the module, which names the fix
    IMPORT_ERROR = err

__metaclass__ = type


def select_pods(core, namespace, label_selectors=None, names=None):
    """The Running pods (not being deleted) of the namespace matching every
    label selector, or the named ones, sorted by name."""
    pods = core.list_namespaced_pod(namespace, label_selector=",".join(label_selectors or []) or None,
                                    field_selector="status.phase=Running").items
    if names:
        pods = [pod for pod in pods if pod.metadata.name in names]
    return sorted((pod for pod in pods if pod.metadata.deletion_timestamp is None), key=lambda pod: pod.metadata.name)


def exit_code(status_text):
    """The command's exit code from the exec stream's status channel
    (the API server's metav1.Status), or (None, reason) when it has none,
    such as a command that could not be started."""
    status = yaml.safe_load(status_text) if status_text else None
    if not isinstance(status, dict):
        return None, "no exit status received"
    if status.get("status") == "Success":
        return 0, None
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message")), None
            except (TypeError, ValueError):
                break
    return None, status.get("message") or "exec failed"


# Answers that mean the command was not started because the container is
# not yet known to the node's exec server, moments after the pod became
# Running: a kubelet's "container not found", kwok's "no exec found for
# container" (its index of exec targets follows its own watch). The command
# never ran, so it is started again, for at most NOT_STARTED_SECONDS.
_NOT_STARTED = re.compile(r"container not found|no exec found for container")
NOT_STARTED_SECONDS = 10.0


def exec_in_pod(configuration, namespace, pod_name, container, command, timeout):
    """Run the command in one pod; never raises. A command that the node
    could not start yet is started again (_NOT_STARTED)."""
    started = time.monotonic()
    while True:
        result = _exec_once(configuration, namespace, pod_name, container, command, timeout)
        if not (result["rc"] is None and _NOT_STARTED.search(result["error"] or "")) \
                or time.monotonic() - started > NOT_STARTED_SECONDS:
            break
        time.sleep(0.5)
    result["seconds"] = round(time.monotonic() - started, 3)
    return result


def _drain(resp, stdout, stderr):
    """Take what the stream holds on stdout and stderr."""
    if resp.peek_stdout():
        stdout.append(resp.read_stdout())
    if resp.peek_stderr():
        stderr.append(resp.read_stderr())


def _exec_once(configuration, namespace, pod_name, container, command, timeout):
    """One exec. Each call has its own API client: the kubernetes client's
    stream() swaps the request method of the client it is given, which is
    not safe to share between threads."""
    started = time.monotonic()
    result = {"rc": None, "stdout": "", "stderr": "", "error": None}
    api_client = k8s_client.ApiClient(configuration)
    try:
        core = k8s_client.CoreV1Api(api_client)
        kwargs = {"container": container} if container else {}
        resp = stream(core.connect_get_namespaced_pod_exec, pod_name, namespace, command=command,
                      stdout=True, stderr=True, stdin=False, tty=False, _preload_content=False, **kwargs)
        stdout, stderr = [], []
        deadline = started + timeout
        while resp.is_open() and time.monotonic() < deadline:
            resp.update(timeout=1)
            _drain(resp, stdout, stderr)
        # Each peek reads whatever frames have arrived: the one that reads
        # the close can bring the last output with it, after the channels
        # were taken in this round (the end of a longer output was lost so,
        # or all of a short one).
        _drain(resp, stdout, stderr)
        result["stdout"], result["stderr"] = "".join(stdout), "".join(stderr)
        if resp.is_open():
            resp.close()
            result["error"] = "no answer within %ss" % timeout
        else:
            result["rc"], result["error"] = exit_code(resp.read_channel(3))
    except ApiException as err:
        result["error"] = "%s %s" % (err.status, err.reason)
    except Exception as err:  # pylint: disable=broad-except  # one pod's failure is that pod's result
        result["error"] = str(err) or err.__class__.__name__
    finally:
        api_client.close()
    return result


def exec_in_pods(configuration, pods, container, command, timeout=60, parallel=8, parse_json=False,
                 pod_arguments=None):
    """Run the command in every pod, ``parallel`` at a time; one entry per
    pod, in the order given, with its node and uid (which tells a pod from
    the one of the same name that came before it). ``pod_arguments``:
    {pod name: arguments appended to the command in that pod}."""
    pod_arguments = pod_arguments or {}

    def one(pod):
        entry = {"pod": pod.metadata.name, "node": pod.spec.node_name, "uid": pod.metadata.uid}
        entry.update(exec_in_pod(configuration, pod.metadata.namespace, pod.metadata.name, container,
                                 list(command) + list(pod_arguments.get(pod.metadata.name, ())), timeout))
        if parse_json:
            entry["json"] = None
            if entry["rc"] == 0:
                try:
                    entry["json"] = json.loads(entry["stdout"])
                except ValueError as err:
                    entry["error"] = "output is not JSON: %s" % err
        return entry

    if not pods:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(pods)))) as pool:
        return list(pool.map(one, pods))


def checked_pod_arguments(pod_arguments, running):
    """pod_arguments as {pod: [str, ...]}, or ValueError naming the pod it
    cannot use: one that does not run the command (a group of a round
    would wait for it), or arguments that are not a list of strings."""
    unknown = sorted(set(pod_arguments) - set(running))
    if unknown:
        raise ValueError("pod_arguments names pod(s) that do not run the command: %s (running: %s)"
                         % (", ".join(unknown), ", ".join(sorted(running)) or "none"))
    checked = {}
    for pod, arguments in pod_arguments.items():
        if not isinstance(arguments, list) or not all(isinstance(argument, str) for argument in arguments):
            raise ValueError("pod_arguments of %s must be a list of strings, got %r" % (pod, arguments))
        checked[pod] = list(arguments)
    return checked


def answers_hold(results, wanted):
    """Whether every pod answered JSON holding each item of wanted."""
    return bool(results) and all(
        isinstance(entry.get("json"), dict) and all(entry["json"].get(key) == value for key, value in wanted.items())
        for entry in results)


def follow(look, every, seconds, wanted, clock=time.monotonic, sleep=time.sleep):
    """look() again every `every` seconds while every pod's answer holds
    `wanted` (a look that changed, or a pod that did not answer, ends it)
    and another look still fits in `seconds`. The latest results and how
    many looks were made. One module run then follows a training run for a
    whole progress period: a module run per look cost about a second of the
    controller's CPU each (Ansible's start-up of the module and the import
    of the kubernetes client)."""
    deadline = clock() + seconds
    results, looks = look(), 1
    while wanted and answers_hold(results, wanted) and clock() + every <= deadline:
        sleep(every)
        results, looks = look(), looks + 1
    return results, looks
