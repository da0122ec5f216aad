#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rdma_node_check
short_description: Check a GPU node's readiness for RDMA training
version_added: 0.1.0
description:
  - Inspects one GPU node, or the pod it runs in, by reading C(/proc) and C(/sys), and returns a verdict per
    check with the reason and the fix.
  - "The checks, in order: C(iommu_passthrough), C(mlx5_driver), C(gpudirect_rdma) (nvidia_peermem, legacy
    nv_peer_mem, or DMA-BUF), C(rdma_devices), C(rdma_link), C(roce_gid), C(memlock), C(gpu_count),
    C(nvlink_topology), C(pcie_acs), C(mtu), C(roce_lossless) (PFC and ECN on NCCL's RoCE priority),
    C(gpu_nic_rails) (each GPU's nearest RDMA NIC on the PCIe tree) and
    C(kubelet_topology) (the kubelet's CPU, memory and topology manager policies); with O(in_pod), also
    C(ipc_lock), C(dev_infiniband), C(pod_rails) (the pod's GPUs against its NICs) and C(cpu_placement) (the
    pod's CPUs against its GPUs' NUMA nodes)."
  - Never changes the node; C(changed) is always false.
  - The same checks run inside pods, without Ansible, as the C(mlinfra node-check) command of the collection's
    image.
author:
  - mlinfra maintainers (@mlinfra)
extends_documentation_fragment:
  - mlinfra.multinode.node_root
options:
  mode:
    description:
      - How the node will train. In V(rdma) mode a missing RDMA prerequisite is a failure; in V(tcp) mode it is
        a warning or is skipped.
    type: str
    choices: [rdma, tcp]
    default: rdma
  expect_gpus:
    description:
      - Number of GPUs the node must have, exactly. Unset, any number of GPUs passes.
      - Right inside a pod, which sees just the GPUs it asked for. On a node that may hold more GPUs than a
        training pod asks for, use O(min_gpus).
      - Mutually exclusive with O(min_gpus).
    type: int
  min_gpus:
    description:
      - Fewest GPUs the node must have; more pass.
      - Mutually exclusive with O(expect_gpus).
    type: int
  expect_rdma_devices:
    description:
      - Minimum number of RDMA devices in V(rdma) mode. Unset, at least one.
    type: int
  require_gpudirect:
    description:
      - In V(rdma) mode, fail (rather than warn) when GPUDirect RDMA is not possible.
    type: bool
    default: true
  min_mtu:
    description:
      - MTU the RoCE netdevs should have; a smaller one is a warning.
    type: int
    default: 9000
  min_link_rate_gbps:
    description:
      - Lowest acceptable rate of an active RDMA port, in Gb/s (for example 400 for NDR).
    type: float
  nccl_ib_tc:
    description:
      - The traffic class NCCL's RoCE packets carry (C(NCCL_IB_TC), 0 to 255); C(roce_lossless) checks PFC and ECN
        on the priority it maps to. NCCL's default, 0, when not given.
    type: int
  in_pod:
    description:
      - The module runs inside a training pod; also check what the pod itself sees, the IPC_LOCK capability
        (C(ipc_lock)) and the C(/dev/infiniband) devices (C(dev_infiniband)).
    type: bool
    default: false
  checks:
    description:
      - Run only these checks. All of them by default.
    type: list
    elements: str
    choices: [iommu_passthrough, mlx5_driver, gpudirect_rdma, rdma_devices, rdma_link, roce_gid, memlock,
              gpu_count, nvlink_topology, pcie_acs, mtu, roce_lossless, gpu_nic_rails, kubelet_topology, ipc_lock,
              dev_infiniband,
              pod_rails, cpu_placement]
  fail_on:
    description:
      - Which verdicts fail the task. V(fail) fails on any failed check, V(warn) on warnings too, V(never) only
        reports.
    type: str
    choices: [fail, warn, never]
    default: fail
seealso:
  - module: mlinfra.multinode.nccl_env
"""

EXAMPLES = r"""
- name: Check a node reached over SSH
  mlinfra.multinode.rdma_node_check:
    mode: rdma
    expect_gpus: 4
    expect_rdma_devices: 4
    min_link_rate_gbps: 400
  register: node_check

- name: Check the host from a probe pod that mounts it at /host, reporting only
  mlinfra.multinode.rdma_node_check:
    root: /host
    fail_on: never
  register: node_check

- name: Show what failed and how to fix it
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.message }} -- {{ item.remediation }}"
  loop: "{{ node_check.checks | selectattr('status', 'in', ['fail', 'warn']) }}"
  loop_control:
    label: "{{ item.name }}"

- name: Only the TCP-relevant checks on a node without RDMA
  mlinfra.multinode.rdma_node_check:
    mode: tcp
    checks: [memlock, gpu_count, nvlink_topology]
"""

RETURN = r"""
checks:
  description: One verdict per check, in the order they ran.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name of the check.
      type: str
      sample: rdma_link
    status:
      description: V(pass), V(warn), V(fail) or V(skip).
      type: str
      sample: fail
    message:
      description: What was found.
      type: str
      sample: "port(s) not active: mlx5_10/1 DOWN (Disabled)"
    remediation:
      description: What to do about a warning or failure; empty when there is nothing to do.
      type: str
    data:
      description: The facts the verdict rests on.
      type: dict
    not_applicable:
      description: A V(skip) because the check has nothing to look at by design (tcp mode, InfiniBand ports for a RoCE
        check), not because what it reads could not be read; such a skip is not listed among what a pass did not
        check.
      type: bool
summary:
  description: Number of checks per status, and in total.
  returned: always
  type: dict
  sample: {pass: 10, warn: 0, fail: 1, skip: 0, total: 11}
  contains:
    pass:
      description: Checks that passed.
      type: int
    warn:
      description: Checks that warned.
      type: int
    fail:
      description: Checks that failed.
      type: int
    skip:
      description: Checks that did not apply or had nothing to go on (for example GPUDirect RDMA in O(mode=tcp),
        or C(roce_gid) on a node without RoCE ports).
      type: int
    total:
      description: Checks run.
      type: int
failed_checks:
  description: Names of the checks whose status fails the task under O(fail_on).
  returned: always
  type: list
  elements: str
  sample: [rdma_link]
ok:
  description: Whether no check reached the O(fail_on) level.
  returned: always
  type: bool
facts:
  description:
    - Everything gathered from the node (kernel, IOMMU, modules, GPUs, RDMA devices with ports and GID tables,
      netdevs, memlock, CPUs, PCIe ACS, topology), and C(errors), the files that could not be read or parsed.
    - Pass it to M(mlinfra.multinode.nccl_env) as O(mlinfra.multinode.nccl_env#module:facts).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.mlinfra.multinode.plugins.module_utils.node.checks import CHECK_NAMES, MODES, POD_CHECK_NAMES
from ansible_collections.mlinfra.multinode.plugins.module_utils.node.cli import FAIL_ON, node_check_report


def argument_spec():
    return dict(
        root=dict(type="path", default="/"),
        nvidia_smi=dict(type="path"),
        mode=dict(type="str", choices=list(MODES), default="rdma"),
        expect_gpus=dict(type="int"),
        min_gpus=dict(type="int"),
        expect_rdma_devices=dict(type="int"),
        require_gpudirect=dict(type="bool", default=True),
        min_mtu=dict(type="int", default=9000),
        min_link_rate_gbps=dict(type="float"),
        nccl_ib_tc=dict(type="int"),
        checks=dict(type="list", elements="str", choices=list(CHECK_NAMES + POD_CHECK_NAMES)),
        in_pod=dict(type="bool", default=False),
        fail_on=dict(type="str", choices=list(FAIL_ON), default="fail"),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True,
                           mutually_exclusive=[("expect_gpus", "min_gpus")])
    params = module.params
    for name in ("expect_gpus", "min_gpus", "expect_rdma_devices", "min_mtu"):
        if params[name] is not None and params[name] < 0:
            module.fail_json(msg="%s must be 0 or more, got %d" % (name, params[name]))
    if params["nccl_ib_tc"] is not None and not 0 <= params["nccl_ib_tc"] <= 255:
        module.fail_json(msg="nccl_ib_tc is a traffic class byte, 0 to 255, got %d" % params["nccl_ib_tc"])
    report = node_check_report(
        root=params["root"], mode=params["mode"], expect_gpus=params["expect_gpus"],
        expect_rdma_devices=params["expect_rdma_devices"], require_gpudirect=params["require_gpudirect"],
        min_mtu=params["min_mtu"], min_link_rate_gbps=params["min_link_rate_gbps"], checks=params["checks"],
        nvidia_smi=params["nvidia_smi"], fail_on=params["fail_on"], in_pod=params["in_pod"],
        min_gpus=params["min_gpus"], nccl_ib_tc=params["nccl_ib_tc"])
    if not report["ok"]:
        failing = [check for check in report["checks"] if check["name"] in report["failed_checks"]]
        msg = "; ".join("%s: %s (fix: %s)" % (c["name"], c["message"], c["remediation"] or "see data")
                        for c in failing)
        module.fail_json(msg="%d check(s) failed: %s" % (len(failing), msg), changed=False, **report)
    module.exit_json(changed=False, **report)


if __name__ == "__main__":
    main()
