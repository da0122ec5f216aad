#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cluster_lock
short_description: Hold or release a deployment's lock, a Lease in its namespace
version_added: 0.1.0
description:
  - With O(state=held), takes the Lease C(<instance>-lock) in O(namespace) for this play - creating it, renewing
    it, or taking it over when it has expired or the ansible-playbook process that held it from this controller
    host is gone - or waits up to O(wait) seconds for another play to release it, then fails naming that play
    (its playbook, user, controller host and process) and the fix.
  - With O(state=released), deletes the Lease when this play holds it.
  - The holder is this play's ansible-playbook process on this host, so every task of one play holds the same lock
    and the next play on the host takes over a lock its failed or interrupted predecessor left. A lock held from
    another host is honoured for an hour after it was last taken.
author:
  - mlinfra maintainers (@mlinfra)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - mlinfra.multinode.cluster_client
notes:
  - Holding and releasing the lock is bookkeeping, not a change to the deployment, so it reports C(changed=false).
attributes:
  check_mode:
    description: Reads only in check mode; says whether the lock could be taken, and fails as a real run would when
      another play holds it.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
options:
  state:
    description: Hold the lock, or release it.
    type: str
    choices: [held, released]
    default: held
  instance:
    description: The deployment's C(cluster_app_name); the Lease is C(<instance>-lock).
    type: str
    required: true
  namespace:
    description: The deployment's namespace; it must exist.
    type: str
    required: true
  action:
    description: The playbook that holds the lock, in the holder's name (for example C(deploy.yml)).
    type: str
    required: true
  wait:
    description: Seconds to wait for another play's lock (C(cluster_lock_wait)); 0 refuses at once.
    type: int
    default: 60
  caller_pid:
    description:
      - A process of the play below its ansible-playbook process, where the lock's holder is looked for (the
        outermost ansible-playbook process above it). The roles give the task's worker, C($PPID) of a pipe lookup
        in the task's arguments, since the module process itself may have been started by another (a fork
        server). 0 looks above the module's own parent.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Hold the deployment's lock
  mlinfra.multinode.cluster_lock:
    instance: "{{ cluster_app_name }}"
    namespace: "{{ cluster_namespace }}"
    action: deploy.yml
    wait: "{{ cluster_lock_wait | int }}"

- name: Release it
  mlinfra.multinode.cluster_lock:
    state: released
    instance: "{{ cluster_app_name }}"
    namespace: "{{ cluster_namespace }}"
    action: deploy.yml
"""

RETURN = r"""
holder:
  description: This play's holder identity.
  returned: always
  type: str
  sample: deploy.yml by alice@bastion, pid 4242 (start 981234)
taken:
  description: Why the lock could be taken (V(free), V(ours), V(expired), V(its process is gone)); empty on release.
  returned: always
  type: str
waited:
  description: Seconds waited for another play.
  returned: always
  type: int
released:
  description: Whether this play's lock was deleted.
  returned: when O(state=released)
  type: bool
"""

import copy
import datetime
import getpass
import os
import socket
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.exceptions import CoreException
from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster import lock as cluster_lock
from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster import ownership

try:
    from kubernetes.dynamic.exceptions import ConflictError, DynamicApiError, NotFoundError
    from urllib3.exceptions import HTTPError
except ImportError:  # AnsibleK8SModule reports the missing library
    ConflictError = DynamicApiError = NotFoundError = HTTPError = Exception

POLL_SECONDS = 2


def argument_spec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(state=dict(type="str", choices=["held", "released"], default="held"),
                instance=dict(type="str", required=True),
                namespace=dict(type="str", required=True),
                action=dict(type="str", required=True),
                wait=dict(type="int", default=60),
                timeout=dict(type="int", default=30),
                caller_pid=dict(type="int", default=0))
    return spec


def me(action, caller_pid):
    start = caller_pid or os.getppid()
    pid = cluster_lock.play_process(start) or start
    return cluster_lock.holder_identity(action, getpass.getuser(), socket.gethostname(), pid,
                                        cluster_lock.process_start(pid) or 0)


class Lock(object):
    def __init__(self, module, client):
        self.module, self.params = module, module.params
        self.leases = client.resource("Lease", "coordination.k8s.io/v1")
        self.client = client
        self.name = cluster_lock.lock_name(self.params["instance"])
        self.holder = me(self.params["action"], self.params["caller_pid"])

    def read(self):
        try:
            return self.client.get(self.leases, name=self.name, namespace=self.params["namespace"],
                                   _request_timeout=self.params["timeout"]).to_dict()
        except NotFoundError:
            return None

    def write(self, live, now):
        """Takes the lock; False when another play was quicker."""
        spec = {"holderIdentity": self.holder, "leaseDurationSeconds": cluster_lock.LEASE_SECONDS,
                "acquireTime": cluster_lock.micro_time(now), "renewTime": cluster_lock.micro_time(now)}
        if live and live["spec"].get("holderIdentity") == self.holder:
            spec["acquireTime"] = live["spec"].get("acquireTime") or spec["acquireTime"]
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.params["namespace"],
                             "labels": ownership.owner_labels(self.params["instance"])},
                "spec": spec}
        if self.module.check_mode:
            return True
        try:
            if live is None:
                self.client.create(self.leases, body, namespace=self.params["namespace"],
                                   _request_timeout=self.params["timeout"])
            else:
                # The resourceVersion read: a play that changed it since loses.
                body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
                self.client.replace(self.leases, body, name=self.name, namespace=self.params["namespace"],
                                    _request_timeout=self.params["timeout"])
        except ConflictError:
            return False
        return True

    def hold(self):
        began = time.monotonic()
        while True:
            live = self.read()
            now = datetime.datetime.now(datetime.timezone.utc)
            verdict, why = ("take", "free") if live is None else cluster_lock.judge(
                live.get("spec") or {}, self.holder, now, socket.gethostname())
            waited = int(time.monotonic() - began)
            if verdict == "take":
                if self.write(live, now):
                    # Bookkeeping, not a change to the deployment: a
                    # second run of an unchanged play stays unchanged.
                    return dict(changed=False, holder=self.holder, taken=why, waited=waited)
                continue
            if waited >= self.params["wait"]:
                self.module.fail_json(msg=cluster_lock.held_message(why, live["spec"], waited,
                                                                    self.params["namespace"],
                                                                    self.params["instance"], now),
                                      holder=self.holder, taken="", waited=waited)
            time.sleep(POLL_SECONDS)

    def release(self):
        live = self.read()
        mine = live is not None and (live.get("spec") or {}).get("holderIdentity") == self.holder
        if mine and not self.module.check_mode:
            try:
                self.client.delete(self.leases, name=self.name, namespace=self.params["namespace"],
                                   body={"preconditions": {"resourceVersion": live["metadata"]["resourceVersion"]}},
                                   _request_timeout=self.params["timeout"])
            except (NotFoundError, ConflictError):
                mine = False
        return dict(changed=False, released=mine, holder=self.holder, taken="", waited=0)


def main():
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argument_spec(), supports_check_mode=True)
    if module.params["wait"] < 0:
        module.fail_json(msg="wait must be 0 or more seconds, got %s" % module.params["wait"])
    try:
        lock = Lock(module, get_api_client(module=module))
        result = lock.hold() if module.params["state"] == "held" else lock.release()
    # The client's own words: the api_faults callback names a lost API
    # (refused, reset, timed out) or a kubeconfig gone from them.
    except (CoreException, DynamicApiError, HTTPError, OSError) as exc:
        # The client's words first: they say what happened to the API.
        module.fail_json(msg="%s (while %s the lock of %s/%s)" % (
            exc, "taking" if module.params["state"] == "held" else "releasing", module.params["namespace"],
            module.params["instance"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
