#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cluster_reach
short_description: Reach a cluster's API server within a time limit
version_added: 0.1.0
description:
  - Asks the API server for its version, with a limit on the whole request (O(timeout)) and no retries, and fails
    with one line that names the server, what happened (no answer in time, connection refused, TLS failed,
    credentials refused) and what to do next.
  - The kubernetes client the other cluster modules use waits for an answer without a limit, so a server that
    accepts the connection and never answers (a black hole, a stalled proxy, an overloaded API server) holds a
    play at its first task for as long as anyone waits. Run this first.
  - The client is configured as kubernetes.core's modules configure theirs (O(kubeconfig), O(context), the
    C(K8S_AUTH_*) variables, or the pod's own service account).
author:
  - mlinfra maintainers (@mlinfra)
extends_documentation_fragment:
  - kubernetes.core.k8s_auth_options
  - mlinfra.multinode.read_only
options:
  timeout:
    description: Seconds each request may take, connection and TLS included.
    type: int
    default: 30
  namespace:
    description:
      - A namespace to look for once the server has answered; RV(namespace_exists) says whether it exists.
      - One module run instead of a M(kubernetes.core.k8s_info) of its own, which every playbook would start.
    type: str
    version_added: 0.1.0
"""

EXAMPLES = r"""
- name: Reach the cluster's API within 30 seconds
  mlinfra.multinode.cluster_reach:
    kubeconfig: ~/.kube/config
    context: admin@my-cluster
    timeout: 30
  register: api

- name: Show the server's version
  ansible.builtin.debug:
    msg: "{{ api.server }} runs {{ api.version }}"
"""

RETURN = r"""
server:
  description: The API server's address, as the kubeconfig gives it.
  returned: always
  type: str
  sample: https://api.ocp.example.com:6443
version:
  description: The server's version (its C(gitVersion)).
  returned: success
  type: str
  sample: v1.34.4
seconds:
  description: How long the answer took.
  returned: success
  type: float
namespace_exists:
  description: Whether O(namespace) exists.
  returned: success, when O(namespace) is given
  type: bool
  sample: true
"""

import copy

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
from ansible_collections.kubernetes.core.plugins.module_utils.k8s.core import AnsibleK8SModule
from ansible_collections.mlinfra.multinode.plugins.module_utils.cluster import reach as cluster_reach


def argument_spec():
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(timeout=dict(type="int", default=30), namespace=dict(type="str"))
    return spec


def main():
    # AnsibleK8SModule fails with the fix when the kubernetes library is missing.
    module = AnsibleK8SModule(module_class=AnsibleModule, argument_spec=argument_spec(), supports_check_mode=True)
    timeout = module.params["timeout"]
    if timeout < 1:
        module.fail_json(msg="timeout must be 1 or more, got %s" % timeout)
    auth = dict((name, module.params.get(name)) for name in AUTH_ARG_SPEC)
    server = None
    try:
        config = cluster_reach.configuration(auth)
        server = config.host
        reached = cluster_reach.reach(config, timeout)
        if module.params["namespace"]:
            reached["namespace_exists"] = cluster_reach.namespace_exists(config, module.params["namespace"], timeout)
        module.exit_json(changed=False, **reached)
    except cluster_reach.ReachError as err:
        module.fail_json(msg=str(err), server=server)


if __name__ == "__main__":
    main()
