# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: sriov_unsynced
short_description: What keeps the SR-IOV operator's nodes from being in sync
version_added: 0.1.0
description:
  - Reads the SriovNetworkNodeState objects the SR-IOV Network Operator keeps per node and says, for each named
    node, what is not done yet; an empty list means every named node is configured.
  - A node is in sync when its state reports C(status.syncStatus) V(Succeeded) and, for each physical function
    asked for, at least the wanted number of virtual functions and the wanted MTU in C(status.interfaces). The
    interface check keeps a C(Succeeded) that predates a policy change from counting as done.
author:
  - mlinfra maintainers (@mlinfra)
positional: nodes, pfs, num_vfs, mtu
options:
  _input:
    description: The SriovNetworkNodeState objects (C(resources) of a C(k8s_info) read).
    type: list
    elements: dict
    required: true
  nodes:
    description: Names of the nodes that must be in sync; each one's state is named like the node.
    type: list
    elements: str
    required: true
  pfs:
    description: Physical functions (interface names) every node must have configured.
    type: list
    elements: str
    required: true
  num_vfs:
    description: Virtual functions each physical function must have, at least.
    type: int
    required: true
  mtu:
    description: MTU each physical function must have; 0 does not check it.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: Fail unless every GPU node is configured
  ansible.builtin.assert:
    that: problems | length == 0
    fail_msg: "{{ problems | join('; ') }}"
  vars:
    problems: "{{ states.resources | mlinfra.multinode.sriov_unsynced(['node-1'], ['ens1f0np0'], 8, 9000) }}"
"""

RETURN = r"""
_value:
  description:
    - One entry per problem, each starting with the node's name and a colon, then what is wrong (the sync status
      and the operator's last error, a missing NIC, too few VFs, another MTU); empty when every node is in sync.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError

ERROR_LENGTH = 300


def _node_problems(node, state, pfs, num_vfs, mtu):
    if state is None:
        return ["%s: no SriovNetworkNodeState yet (the operator's config daemon has not reported this node)" % node]
    status = state.get("status") or {}
    sync = status.get("syncStatus") or "not reported"
    if sync != "Succeeded":
        error = (status.get("lastSyncError") or "").strip()
        if len(error) > ERROR_LENGTH:
            error = error[:ERROR_LENGTH] + "..."
        return ["%s: syncStatus %s%s" % (node, sync, ": " + error if error else "")]
    interfaces = dict((i.get("name"), i) for i in status.get("interfaces") or [] if isinstance(i, dict))
    problems = []
    for pf in pfs:
        interface = interfaces.get(pf)
        if interface is None:
            problems.append("%s: has no NIC %s (it reports %s)"
                            % (node, pf, ", ".join(sorted(n for n in interfaces if n)) or "no NICs"))
            continue
        have = interface.get("numVfs") or 0
        if have < num_vfs:
            problems.append("%s: %s has %d of %d VFs" % (node, pf, have, num_vfs))
        if mtu and interface.get("mtu") != mtu:
            problems.append("%s: %s has MTU %s, wants %d" % (node, pf, interface.get("mtu"), mtu))
    return problems


def sriov_unsynced(states, nodes, pfs, num_vfs, mtu=0):
    if not isinstance(states, list) or not isinstance(nodes, list) or not isinstance(pfs, list):
        raise AnsibleFilterError("sriov_unsynced takes a list of SriovNetworkNodeState objects, node names and "
                                 "physical function names")
    try:
        num_vfs, mtu = int(num_vfs), int(mtu or 0)
    except (TypeError, ValueError) as error:
        raise AnsibleFilterError("sriov_unsynced: num_vfs and mtu must be whole numbers, got %r and %r"
                                 % (num_vfs, mtu)) from error
    by_node = dict(((s.get("metadata") or {}).get("name"), s) for s in states if isinstance(s, dict))
    problems = []
    for node in nodes:
        problems.extend(_node_problems(node, by_node.get(node), pfs, num_vfs, mtu))
    return problems


class FilterModule(object):
    def filters(self):
        return {"sriov_unsynced": sriov_unsynced}
