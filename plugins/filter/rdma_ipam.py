# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: rdma_ipam
short_description: The CNI IPAM configuration of each RDMA network
version_added: 0.1.0
description:
  - Gives every entry of C(cluster_rdma_nics) the IPAM configuration of its network attachment (SriovNetwork or
    NetworkAttachmentDefinition), keyed by the entry's C(name).
  - A NIC named in O(ranges) with a CIDR string gets whereabouts with that range; one named with a mapping gets
    that mapping as its IPAM configuration unchanged (for example one of type C(dhcp)); any other NIC gets whereabouts
    with the range C(192.168.<100 + position>.0/24), its position in the list counting from 0.
  - Each NIC of RoCE traffic needs its own subnet (one rail, one subnet, so that the kernel routes each rail out of
    its own interface), so whereabouts ranges that overlap are an error.
  - Errors name the inventory variable (C(sriov_ipam_ranges)) and the fix.
author:
  - mlinfra maintainers (@mlinfra)
positional: ranges
options:
  _input:
    description: The C(cluster_rdma_nics) list; each entry has at least a C(name).
    type: list
    elements: dict
    required: true
  ranges:
    description: NIC name to a whereabouts CIDR range or to a complete IPAM configuration (C(sriov_ipam_ranges)).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Whereabouts for the first NIC's range, DHCP for the second, the default range for the third
  ansible.builtin.debug:
    msg: "{{ nics | mlinfra.multinode.rdma_ipam({'rail1': '10.10.1.0/24', 'rail2': {'type': 'dhcp'}}) }}"
  vars:
    nics: [{name: rail1}, {name: rail2}, {name: rail3}]
"""

RETURN = r"""
_value:
  description: NIC name to its IPAM configuration (a mapping with at least C(type)).
  type: dict
"""

import ipaddress

from ansible.errors import AnsibleFilterError

DEFAULT_SUBNET_BASE = 100
VARIABLE = "sriov_ipam_ranges"


def _fail(msg):
    raise AnsibleFilterError("%s; fix: correct %s in the inventory's group_vars (sriov.yml)" % (msg, VARIABLE))


def _whereabouts(name, cidr):
    try:
        network = ipaddress.ip_network(str(cidr).strip(), strict=False)
    except ValueError:
        _fail("%s[%s] must be a CIDR range such as 192.168.100.0/24, got %r" % (VARIABLE, name, cidr))
    if network.num_addresses < 4:
        _fail("%s[%s]: %s leaves no room for pod addresses" % (VARIABLE, name, network))
    # Passed on as written: whereabouts itself accepts a range with host bits set.
    return {"type": "whereabouts", "range": str(cidr).strip()}, network


def rdma_ipam(nics, ranges):
    if not isinstance(nics, list) or not all(isinstance(nic, dict) and nic.get("name") for nic in nics):
        raise AnsibleFilterError("rdma_ipam takes cluster_rdma_nics, a list of mappings that each have a name")
    if not isinstance(ranges, dict):
        _fail("%s must be a mapping of NIC name to a CIDR range or an IPAM mapping, got %s"
              % (VARIABLE, type(ranges).__name__))
    names = [nic["name"] for nic in nics]
    unknown = sorted(set(ranges) - set(names))
    if unknown:
        _fail("%s names %s, which cluster_rdma_nics does not (its names: %s)"
              % (VARIABLE, ", ".join(unknown), ", ".join(names)))

    ipam, networks = {}, []
    for position, name in enumerate(names):
        given = ranges.get(name)
        if isinstance(given, dict):
            if not isinstance(given.get("type"), str) or not given["type"]:
                _fail("%s[%s] is an IPAM mapping without a type (for example {type: dhcp})" % (VARIABLE, name))
            ipam[name] = dict(given)
            continue
        if given is None:
            if DEFAULT_SUBNET_BASE + position > 255:
                _fail("%s: NIC %s has no range and there is no default for the %dth NIC"
                      % (VARIABLE, name, position + 1))
            given = "192.168.%d.0/24" % (DEFAULT_SUBNET_BASE + position)
        elif not isinstance(given, str):
            _fail("%s[%s] must be a CIDR string or an IPAM mapping, got %r" % (VARIABLE, name, given))
        ipam[name], network = _whereabouts(name, given)
        networks.append((name, network))

    for index, (name, network) in enumerate(networks):
        for other, other_network in networks[index + 1:]:
            if network.version == other_network.version and network.overlaps(other_network):
                _fail("%s: the ranges of %s (%s) and %s (%s) overlap; each RDMA NIC needs its own subnet"
                      % (VARIABLE, name, network, other, other_network))
    return ipam


class FilterModule(object):
    def filters(self):
        return {"rdma_ipam": rdma_ipam}
