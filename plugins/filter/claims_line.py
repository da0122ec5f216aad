# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: claims_line
short_description: The line teardown.yml ends with, on the workspace claims it kept or deleted
version_added: 0.1.0
description:
  - Names the deployment's workspace claims with their sizes, says whether they were deleted or kept, and for kept
    ones how to delete them (C(-e purge_workspaces=true)).
author:
  - mlinfra maintainers (@mlinfra)
options:
  _input:
    description: The claims, as C(kubernetes.core.k8s_info) gives them.
    type: list
    elements: dict
    required: true
  namespace:
    description: Their namespace.
    type: str
    required: true
  purged:
    description: Whether they were deleted.
    type: bool
    required: true
"""

EXAMPLES = r"""
- name: Report what was kept
  ansible.builtin.debug:
    msg: "{{ teardown_claims.resources | mlinfra.multinode.claims_line(namespace=cluster_namespace, purged=false) }}"
"""

RETURN = r"""
_value:
  description: The line - deleted or kept, how many, the namespace, how to delete kept ones, each claim with its size.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.mlinfra.multinode.plugins.module_utils.report.deployment_status import claims_line as build


def claims_line(claims, namespace, purged):
    if not isinstance(claims, list) or not all(isinstance(claim, dict) and "metadata" in claim for claim in claims):
        raise AnsibleFilterError("claims_line takes the claims as k8s_info gives them")
    if not isinstance(purged, bool):
        raise AnsibleFilterError("claims_line: purged takes a boolean, got %r" % (purged,))
    return build(namespace, claims, purged)


class FilterModule(object):
    def filters(self):
        return {"claims_line": claims_line}
