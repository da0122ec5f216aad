#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nccl_env
short_description: Detect the NCCL and launch environment of a GPU node
version_added: 0.1.0
description:
  - "Computes the NCCL and launch variables for one node from its facts, each with the reason it was chosen:
    E(NCCL_IB_DISABLE), E(NCCL_IB_HCA), E(NCCL_SOCKET_IFNAME), E(NCCL_IB_GID_INDEX), E(NCCL_NET_GDR_LEVEL),
    E(NCCL_P2P_LEVEL), E(GPUS_PER_NODE), E(OMP_NUM_THREADS), and the transport (V(rdma) or V(tcp))."
  - A variable is set only where there is evidence that NCCL's (or torchrun's) own default is worse; the
    others are left unset, and RV(details) says why. NCCL picks its peer-to-peer and GPUDirect levels well
    by itself, so E(NCCL_P2P_LEVEL) and E(NCCL_NET_GDR_LEVEL) are left to it.
  - E(NCCL_IB_GID_INDEX) is one index for every device. It is set only when every RoCE device has its
    RoCE v2 IPv4 GID at the same index and NCCL is older than 2.21 (or of unknown version); NCCL 2.21 and
    later pick the GID of each device by themselves.
  - A value in O(overrides) always wins.
  - The same code runs in pods, without Ansible, as the C(mlinfra autodetect) command (the autodetect init
    container), which writes the result as a shell file for the launcher.
author:
  - mlinfra maintainers (@mlinfra)
extends_documentation_fragment:
  - mlinfra.multinode.node_root
options:
  facts:
    description:
      - Facts gathered by M(mlinfra.multinode.rdma_node_check) (its RV(mlinfra.multinode.rdma_node_check#module:facts)).
        When given, the node is not read again and O(root) is ignored.
    type: dict
  mode:
    description:
      - V(auto) uses RDMA when a usable RDMA port exists. V(rdma) demands it and fails when there is none,
        rather than letting NCCL fall back to sockets silently. V(tcp) disables NCCL's RDMA transport.
    type: str
    choices: [auto, rdma, tcp]
    default: auto
  overrides:
    description:
      - Values that win over detection, as a mapping of variable name to value. A null value removes a
        variable that detection would set.
      - A name is C(NCCL_) followed by capitals, digits and C(_), or one of the other variables decided here
        (C(GPUS_PER_NODE), C(OMP_NUM_THREADS)); a value is one line of text or a number. Anything else is
        refused, since names and values are written into a file that shells source.
    type: dict
    default: {}
  nccl_version:
    description:
      - Version of the NCCL the job will use, for example V(2.21.5). By default it is looked up where this
        module runs (E(NCCL_VERSION), the nvidia-nccl wheel, libnccl.so.2.x.y); the training image's NCCL is
        what matters, so give it when the module runs elsewhere.
    type: str
seealso:
  - module: mlinfra.multinode.rdma_node_check
"""

EXAMPLES = r"""
- name: Gather and check the node
  mlinfra.multinode.rdma_node_check:
    root: /host
    fail_on: never
  register: node_check

- name: Decide the NCCL environment from the same facts
  mlinfra.multinode.nccl_env:
    facts: "{{ node_check.facts }}"
    mode: rdma
    nccl_version: "2.21.5"
    overrides:
      NCCL_DEBUG: INFO
  register: nccl

- name: Show each decision with its reason
  ansible.builtin.debug:
    msg: "{{ item.name }}={{ item.value if item.set else '(unset)' }}: {{ item.reason }}"
  loop: "{{ nccl.details }}"
  loop_control:
    label: "{{ item.name }}"
"""

RETURN = r"""
transport:
  description: V(rdma) or V(tcp).
  returned: always
  type: str
  sample: rdma
transport_reason:
  description: Why that transport.
  returned: always
  type: str
  sample: 4 usable RDMA port(s)
env:
  description: The variables to set, name to value (only those that are set).
  returned: always
  type: dict
  sample: {NCCL_SOCKET_IFNAME: "=eth0", NCCL_IB_GID_INDEX: "3", GPUS_PER_NODE: "4", OMP_NUM_THREADS: "32"}
details:
  description: Every variable decided on, set or not, with its reason.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Variable name.
      type: str
    value:
      description: Its value, or null when left unset.
      type: str
    set:
      description: Whether the variable is set.
      type: bool
    source:
      description: V(detected), V(user) (from O(overrides)) or V(environment).
      type: str
    reason:
      description: Why it is set, or why it is left to NCCL.
      type: str
env_file:
  description: The result as a shell file of exports, with the reasons as comments.
  returned: always
  type: str
nccl_version:
  description: The NCCL version decided for, or null when unknown.
  returned: always
  type: str
  sample: 2.21.5
nccl_version_source:
  description: Where that version was found.
  returned: always
  type: str
gpus:
  description: Number of NVIDIA GPUs on the node (those under C(/proc/driver/nvidia/gpus)).
  returned: always
  type: int
  sample: 4
gpudirect:
  description:
    - Whether GPUDirect RDMA is available (C(nvidia_peermem) or C(nv_peer_mem) loaded, or DMA-BUF with the
      NVIDIA open kernel module); null when the transport is not V(rdma).
  returned: always
  type: bool
rdma_ports:
  description: The RDMA ports NCCL can use on this node, with their netdevs.
  returned: always
  type: list
  elements: dict
  contains:
    device:
      description: RDMA device name.
      type: str
      sample: mlx5_0
    port:
      description: Port number on that device.
      type: int
      sample: 1
    netdev:
      description: The network interface of the port; null for an InfiniBand device without one.
      type: str
      sample: ens1f0np0
    link_layer:
      description: V(InfiniBand) or V(Ethernet) (RoCE).
      type: str
errors:
  description: Why the requested transport cannot work (the task fails when there is one).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.mlinfra.multinode.plugins.module_utils.fabric.nccl_env import TRANSPORT_MODES, override_error, \
    parse_version, render_env_file
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.cli import detect_report

# Keys every facts dict from rdma_node_check has; a dict without them is not one.
REQUIRED_FACT_KEYS = ("kernel", "modules", "gpudirect", "nvidia", "rdma", "netdevs", "cpus")


def argument_spec():
    return dict(
        root=dict(type="path", default="/"),
        nvidia_smi=dict(type="path"),
        facts=dict(type="dict"),
        mode=dict(type="str", choices=list(TRANSPORT_MODES), default="auto"),
        overrides=dict(type="dict", default={}),
        nccl_version=dict(type="str"),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    facts = params["facts"]
    if facts is not None:
        missing = [key for key in REQUIRED_FACT_KEYS if key not in facts]
        if missing:
            module.fail_json(msg="facts is not the facts of rdma_node_check (missing %s): pass "
                                 "'<registered result>.facts'" % ", ".join(missing))
    if params["nccl_version"] and not parse_version(params["nccl_version"]):
        module.fail_json(msg="nccl_version must look like 2.21.5, got %r" % params["nccl_version"])
    refused = [error for error in (override_error(name, value) for name, value in params["overrides"].items())
               if error]
    if refused:
        module.fail_json(msg="overrides: %s; fix: name NCCL variables only, with one-line values" % "; ".join(refused))
    result = detect_report(root=params["root"], mode=params["mode"], overrides=params["overrides"],
                           nccl_version=params["nccl_version"], nvidia_smi=params["nvidia_smi"], facts=facts)[0]
    result["env_file"] = render_env_file(result)
    if result["errors"]:
        module.fail_json(msg="; ".join(result["errors"]), changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
