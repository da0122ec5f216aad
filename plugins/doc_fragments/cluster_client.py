# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""What the collection's own cluster modules (cluster_ownership,
cluster_lock) share: kubernetes.core's client and a bound on each request."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
options:
  timeout:
    description: Seconds each request to the API server may take (C(cluster_api_timeout)).
    type: int
    default: 30
notes:
  - The client is configured as kubernetes.core's modules configure theirs (O(kubeconfig), O(context), the
    C(K8S_AUTH_*) variables, or the pod's own service account); every request is bounded by O(timeout), and a lost
    API fails the task with the client's own words, which the C(mlinfra.multinode.api_faults) callback names.
"""
