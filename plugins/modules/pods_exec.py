#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pods_exec
short_description: Run one read-only command in many pods at once
version_added: 0.1.0
description:
  - Runs a command in every Running pod of a namespace that matches O(label_selectors) (or in the pods named by
    O(pods)), several at a time, and returns each pod's node, exit code, output and, with O(parse_json), its
    output parsed as JSON.
  - Meant for probes that only read (the detected NCCL environment of each pod, in-pod checks); it reports
    no change and also runs in check mode. One pod that cannot be reached or whose command fails is that pod's
    result, not a failure of the task; use O(fail_on_error) to fail instead.
  - M(kubernetes.core.k8s_exec) runs in one pod per task; a loop over pods costs a module start each and runs
    them one after the other.
author:
  - mlinfra maintainers (@mlinfra)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
options:
  namespace:
    description: Namespace of the pods.
    type: str
    required: true
  label_selectors:
    description: Label selectors the pods must all match, for example V(app.kubernetes.io/name=h-kim).
    type: list
    elements: str
    default: []
  pods:
    description: Names of the pods; only those that are Running are used. With O(label_selectors), both must match.
    type: list
    elements: str
    default: []
  container:
    description: Container to run in (default the pod's first).
    type: str
  command:
    description: The command and its arguments (no shell; use V([sh, -c, "..."]) for one).
    type: list
    elements: str
    required: true
  pod_arguments:
    description:
      - Arguments appended to O(command) in one pod, by pod name; a pod not named runs O(command) alone.
      - Runs one program with each pod's own part at once, such as the rounds of fault isolation, where the pods of
        each group form a job of their own.
      - Every name must be one of the pods that run the command; another is refused before anything runs.
    type: dict
    default: {}
    version_added: 0.1.0
  timeout:
    description: Seconds each pod's command may take.
    type: int
    default: 60
  parallel:
    description: How many pods run the command at once.
    type: int
    default: 8
  parse_json:
    description: Parse each output as JSON into RV(pods[].json) (null when the command failed or the output is not JSON).
    type: bool
    default: false
  fail_on_error:
    description: Fail the task when a pod's command could not run, exited non-zero, or (with O(parse_json)) did not
      print JSON.
    type: bool
    default: false
  repeat_while:
    description:
      - Run the command again, every O(repeat_every) seconds for at most O(repeat_for) seconds, while every pod's
        output parsed as JSON holds each of these keys with its value; the results are those of the last round.
      - Follows a state (for example the key C(state) with the value V(running)) in one task instead of a task
        retried with C(until), which starts the module again for each look. Needs O(parse_json).
    type: dict
    default: {}
  repeat_every:
    description: Seconds between two rounds of O(repeat_while).
    type: int
    default: 10
  repeat_for:
    description: Seconds within which the last round of O(repeat_while) starts; V(0) runs the command once.
    type: int
    default: 0
attributes:
  check_mode:
    description: Runs the command in check mode too; give it only commands that read.
    support: full
  diff_mode:
    description: Nothing to show as a diff; the module changes nothing.
    support: none
requirements:
  - kubernetes >= 24.2.0
  - PyYAML >= 3.11
seealso:
  - module: kubernetes.core.k8s_exec
"""

EXAMPLES = r"""
- name: Read the detected NCCL environment of every pod
  mlinfra.multinode.pods_exec:
    namespace: ml-train
    label_selectors:
      - app.kubernetes.io/name=h-kim
    container: trainer
    command: [sh, -c, 'cat "$MLINFRA_RUN_DIR/nccl.json"']
    parse_json: true
  register: nccl_json_read

- name: Show each pod's transport
  ansible.builtin.debug:
    msg: "{{ item.pod }} on {{ item.node }}: {{ item.json.transport | default('unreadable: ' ~ item.error) }}"
  loop: "{{ nccl_json_read.pods }}"
  loop_control:
    label: "{{ item.pod }}"

- name: Follow a training run for up to a minute, looking every 10 s, until a pod's state is no longer running
  mlinfra.multinode.pods_exec:
    namespace: ml-train
    pods: [h-kim-0, h-kim-1]
    container: trainer
    command: [bash, -c, 'exec python3 "$MLINFRA_PLUGINS_DIR/../files/bin/mlinfra" train status --run-dir "$1/$POD_NAME"',
              mlinfra train, mlinfra-runs/run1]
    parse_json: true
    repeat_while: {state: running}
    repeat_every: 10
    repeat_for: 60
  register: run_look
"""

RETURN = r"""
pods:
  description: One entry per pod, sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    pod:
      description: Pod name.
      type: str
    node:
      description: The node it runs on.
      type: str
    rc:
      description: Exit code of the command, null when it has none (not started, pod unreachable, timed out).
      type: int
    stdout:
      description: Standard output.
      type: str
    stderr:
      description: Standard error.
      type: str
    json:
      description: The output parsed as JSON (O(parse_json) only; null when it could not be).
      type: raw
    error:
      description: Why there is no exit code or no JSON, else null.
      type: str
    seconds:
      description: How long the command took in that pod.
      type: float
failed_pods:
  description: Pods whose command could not run, exited non-zero, or (with O(parse_json)) printed no JSON.
  returned: always
  type: list
  elements: str
rounds:
  description: How many times the command ran in the pods (more than 1 only with O(repeat_while)).
  returned: always
  type: int
"""

import copy

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster import pods_exec


def argument_spec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(
        namespace=dict(type="str", required=True),
        label_selectors=dict(type="list", elements="str", default=[]),
        pods=dict(type="list", elements="str", default=[]),
        container=dict(type="str"),
        command=dict(type="list", elements="str", required=True),
        pod_arguments=dict(type="dict", default={}),
        timeout=dict(type="int", default=60),
        parallel=dict(type="int", default=8),
        parse_json=dict(type="bool", default=False),
        fail_on_error=dict(type="bool", default=False),
        repeat_while=dict(type="dict", default={}),
        repeat_every=dict(type="int", default=10),
        repeat_for=dict(type="int", default=0),
    )
    return spec


def main():
    # AnsibleK8SModule fails with the fix when the kubernetes library is missing.
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    if not params["command"]:
        module.fail_json(msg="command must name a program")
    if params["timeout"] < 1 or params["parallel"] < 1:
        module.fail_json(msg="timeout and parallel must be 1 or more, got %s and %s"
                             % (params["timeout"], params["parallel"]))
    if params["repeat_while"] and not params["parse_json"]:
        module.fail_json(msg="repeat_while compares the pods' JSON answers: set parse_json: true")
    if params["repeat_every"] < 1:
        module.fail_json(msg="repeat_every must be 1 or more, got %s" % params["repeat_every"])
    # Imported here: kubernetes.core's client module needs the kubernetes
    # library at import time, whose absence AnsibleK8SModule has reported.
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
    try:
        k8s = get_api_client(module=module)
    except CoreException as err:
        module.fail_json(msg="cannot reach the cluster: %s" % err)
    core = pods_exec.k8s_client.CoreV1Api(k8s.client.client)
    try:
        pods = pods_exec.select_pods(core, params["namespace"], params["label_selectors"], params["pods"])
    except pods_exec.ApiException as err:
        module.fail_json(msg="cannot list the pods of %s: %s %s" % (params["namespace"], err.status, err.reason))

    try:
        pod_arguments = pods_exec.checked_pod_arguments(params["pod_arguments"], [pod.metadata.name for pod in pods])
    except ValueError as err:
        module.fail_json(msg=str(err))

    def look():
        return pods_exec.exec_in_pods(k8s.configuration, pods, params["container"], params["command"],
                                      timeout=params["timeout"], parallel=params["parallel"],
                                      parse_json=params["parse_json"], pod_arguments=pod_arguments)

    results, rounds = pods_exec.follow(look, params["repeat_every"], max(params["repeat_for"], 0),
                                       params["repeat_while"])
    failed_pods = [entry["pod"] for entry in results
                   if entry["rc"] != 0 or (params["parse_json"] and entry["json"] is None)]
    if failed_pods and params["fail_on_error"]:
        module.fail_json(msg="the command failed in %d of %d pod(s): %s" % (
            len(failed_pods), len(results), "; ".join(
                "%s: %s" % (entry["pod"], entry["error"] or "exit %s: %s" % (entry["rc"], entry["stderr"].strip()[-200:]))
                for entry in results if entry["pod"] in failed_pods)), pods=results, failed_pods=failed_pods, rounds=rounds)
    module.exit_json(changed=False, pods=results, failed_pods=failed_pods, rounds=rounds)


if __name__ == "__main__":
    main()
