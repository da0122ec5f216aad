# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""What a node's own tool prints (mlnx_qos, ethtool): run where the node's
root is this machine's, or read back from a snapshot's recording.

Some of what the checks need is in no file: the port's QoS settings
(``mlnx_qos -i``) and the NIC's per-priority pause counters (``ethtool -S``)
come from the driver through the tool. A host seen through a mounted root
(/host in a probe pod) cannot run them in its network namespace; a snapshot
keeps their output in ``usr/share/mlinfra-snapshot/<tool>-<netdev>.txt``.

Standard library only: shared by the modules and the in-pod commands.
"""

from __future__ import absolute_import, division, print_function

import os
import subprocess

__metaclass__ = type

RECORDINGS = "usr/share/mlinfra-snapshot"
_TIMEOUT = 30


def recording(tool, netdev):
    """Where a snapshot keeps what ``tool`` printed for ``netdev``."""
    return "%s/%s-%s.txt" % (RECORDINGS, tool, netdev)


def tool_output(reader, tool, arguments, netdev, recorded_as=None):
    """(what ``tool arguments`` printed, where it came from), or (None, why
    not). ``recorded_as``: the recording's name when not the tool's."""
    recorded = reader.read(recording(recorded_as or tool, netdev), quiet=True)
    if recorded is not None:
        return recorded, "recorded"
    command = " ".join([tool] + list(arguments))
    if reader.root != "/":
        return None, "no %s output: none recorded, and not run for a root other than /" % tool
    for directory in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/usr/bin", "/sbin"]:
        binary = os.path.join(directory, tool)
        if directory and os.access(binary, os.X_OK):
            try:
                # Shared with the in-pod commands: no AnsibleModule.run_command.
                proc = subprocess.run([binary] + list(arguments), stdout=subprocess.PIPE,  # pylint: disable=ansible-bad-function
                                      stderr=subprocess.PIPE, timeout=_TIMEOUT, universal_newlines=True, check=False)
            except (OSError, subprocess.SubprocessError) as exc:
                return None, "%s: %s" % (command, exc)
            if proc.returncode != 0:
                return None, "%s exited %d" % (command, proc.returncode)
            return proc.stdout, binary
    return None, "%s not installed" % tool
