# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Options shared by the modules that read a node's /proc and /sys."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check mode and return the same result as a normal run.
    support: full
  diff_mode:
    description: Returns no diff; it changes nothing.
    support: none
options:
  root:
    description:
      - Directory under which the node's C(/proc), C(/sys) and C(/dev) are read.
      - C(/) on the node itself; C(/host) in a pod that mounts the host's root there;
        the directory of a recorded node snapshot in tests.
    type: path
    default: /
  nvidia_smi:
    description:
      - Path of the C(nvidia-smi) to run for the GPU topology (C(nvidia-smi topo -m)).
      - By default the one under O(root) is used when it runs (a recorded snapshot carries a stand-in),
        else the first on E(PATH). Without one, the topology is reported as not gathered.
    type: path
notes:
  - Only reads files and runs C(nvidia-smi topo -m); it changes nothing on the node, so check mode
    behaves exactly like a normal run.
  - Reading the PCIe extended configuration space (for the ACS state of PCIe bridges) needs root; without
    it the ACS state is reported as unknown.
  - Needs only the Python standard library on the node.
"""
