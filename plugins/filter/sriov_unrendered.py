# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: sriov_unrendered
short_description: Which SriovNetworks the SR-IOV operator has not turned into the attachments the pods need
version_added: 0.1.0
description:
  - Reads the NetworkAttachmentDefinitions of the deployment's namespace and says, for each RDMA NIC, whether the
    SR-IOV Network Operator has rendered the one its SriovNetwork asks for (named like the NIC) and whether that one
    gives the pods the NIC's resource.
  - The operator renders each attachment some time after the SriovNetwork is created, and a pod created before it
    exists waits in C(ContainerCreating) (Multus cannot find its network). The operator names the resource
    C(<its RESOURCE_PREFIX>/<resourceName>) in the attachment's C(k8s.v1.cni.cncf.io/resourceName) annotation;
    when that is not the NIC's C(resource) (the operator was installed with another prefix) the device plugin hands
    the pods VFs of a pool Multus does not attach.
author:
  - mlinfra maintainers (@mlinfra)
positional: nics
options:
  _input:
    description: The NetworkAttachmentDefinitions of the namespace (C(resources) of a C(k8s_info) read).
    type: list
    elements: dict
    required: true
  nics:
    description: The RDMA NICs (C(cluster_rdma_nics)), each with its C(name) and C(resource).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Wait until every NIC's attachment is rendered
  kubernetes.core.k8s_info:
    api_version: k8s.cni.cncf.io/v1
    kind: NetworkAttachmentDefinition
    namespace: "{{ cluster_namespace }}"
  register: found
  until: found.resources | mlinfra.multinode.sriov_unrendered(cluster_rdma_nics) | rejectattr('rendered') | length == 0
  retries: 30
  delay: 2
"""

RETURN = r"""
_value:
  description: One entry per NIC whose attachment is missing or wrong; empty when every NIC's attachment is right.
  type: list
  elements: dict
  contains:
    nic:
      description: The NIC's C(name), which is its SriovNetwork's and its attachment's.
      type: str
    rendered:
      description: Whether the operator has rendered it (an attachment of that name with an C(sriov) CNI
        configuration); then the problem is what it holds, and waiting will not mend it.
      type: bool
    problem:
      description: What is wrong, starting with the attachment's name.
      type: str
"""

import json

from ansible.errors import AnsibleFilterError

RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"


def _config_type(attachment):
    try:
        config = json.loads((attachment.get("spec") or {}).get("config") or "{}")
    except ValueError:
        return None
    return config.get("type") if isinstance(config, dict) else None


def sriov_unrendered(attachments, nics):
    if not isinstance(attachments, list) or not isinstance(nics, list) or \
            not all(isinstance(nic, dict) and nic.get("name") for nic in nics):
        raise AnsibleFilterError("sriov_unrendered takes a list of NetworkAttachmentDefinitions and the NICs "
                                 "(cluster_rdma_nics, each with a name and a resource)")
    by_name = dict(((item.get("metadata") or {}).get("name"), item) for item in attachments if isinstance(item, dict))
    problems = []
    for nic in nics:
        name, resource = nic["name"], nic.get("resource") or ""
        attachment = by_name.get(name)
        if attachment is None:
            problems.append({"nic": name, "rendered": False, "problem": "%s: not rendered yet" % name})
            continue
        kind = _config_type(attachment)
        if kind != "sriov":
            # One made before (another network type): the operator takes
            # it over and rewrites it.
            problems.append({"nic": name, "rendered": False, "problem": (
                "%s: not rendered yet (the one there is of CNI type %s, not sriov)" % (name, kind))})
            continue
        given = ((attachment.get("metadata") or {}).get("annotations") or {}).get(RESOURCE_ANNOTATION) or ""
        if given != resource:
            said = "%s: the operator gives the pods %s, the NIC's resource is %s" % (
                name, given or "no resource", resource)
            problems.append({"nic": name, "rendered": True, "problem": said})
    return problems


class FilterModule(object):
    def filters(self):
        return {"sriov_unrendered": sriov_unrendered}
