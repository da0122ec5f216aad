# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""A node's snapshot: exactly what the node checks read, and nothing else.

``record_node`` gathers a node's facts as the checks do, with a reader that
copies into a directory every file it read, every directory it listed (its
entries: links, directories, files) and every path it found, with the
symbolic links on the way (sysfs reaches a device's PCI function through
them), and writes what ``nvidia-smi topo -m`` printed beside a stand-in
``usr/bin/nvidia-smi`` that prints it again, what ``mlnx_qos -i`` printed
for each RoCE netdev (roce_qos reads it back), and the RDMA ports' counters
with what ``ethtool -S`` printed for their netdevs (port_counters reads
them back). The checks then give on the
snapshot (``mlinfra node-check --root DIR``) what they gave on the node, so
an operator can send the snapshot of a misbehaving node instead of access
to it, and the tests keep real hardware as a fixture.

What is copied is what the checks and the counters read: /proc and /sys
entries of the kernel, modules, IOMMU, NVIDIA driver, RDMA devices and their
ports' counters, network interfaces,
the locked-memory limit and capabilities of the process, the cgroup CPU
limits, PCI configuration space of the GPUs' and NICs' bridges; no
environment, no file contents beyond those. Device nodes (/dev/infiniband)
become empty files of the same name. Standard library only.
"""

from __future__ import absolute_import, division, print_function

import os
import stat

from .host_tools import recording
from .facts import NodeReader, gather_node_facts
from ..fabric.port_counters import read_port_counters

__metaclass__ = type

TOPOLOGY_FILE = "usr/share/mlinfra-snapshot/nvidia-smi-topo-m.txt"
# The stand-in answers topo -m as the node did, its exit status included.
NVIDIA_SMI_STAND_IN = """#!/bin/sh
# Stand-in for the node's nvidia-smi: prints what the node printed.
here=$(dirname "$0")
case "$*" in
  'topo -m') cat "$here/../share/mlinfra-snapshot/nvidia-smi-topo-m.txt"; exit %d ;;
  --help) echo 'NVIDIA System Management Interface (recorded)' ;;
  *) echo "recorded snapshot: no output for: nvidia-smi $*" >&2; exit 2 ;;
esac
"""
# A sysfs file larger than this is not one the checks read whole (a PCI
# BAR's resourceN); a listed one is recorded empty.
MAX_LISTED_FILE = 65536


class RecordingReader(NodeReader):
    """A NodeReader that copies what it reads from ``root`` into ``dest``."""

    def __init__(self, root, dest):
        super(RecordingReader, self).__init__(root)
        self.dest = os.path.abspath(dest)
        self.kept = set()

    def read(self, *parts, **kwargs):
        value = super(RecordingReader, self).read(*parts, **kwargs)
        self._after_read(parts, value)
        return value

    def read_bytes(self, *parts):
        value = super(RecordingReader, self).read_bytes(*parts)
        self._after_read(parts, value)
        return value

    def _after_read(self, parts, value):
        if value is not None:
            self.keep(os.path.join(*parts), content=True)
        elif os.path.isdir(self.path(*parts)):
            # A directory where a file was read fails there the same way.
            self.keep(os.path.join(*parts))

    def listdir(self, *parts, **kwargs):
        names = super(RecordingReader, self).listdir(*parts, **kwargs)
        if names or os.path.isdir(self.path(*parts)):
            self.keep(os.path.join(*parts))
            for name in names:
                self.keep(os.path.join(os.path.join(*parts), name), content=None)
        return names

    def exists(self, *parts):
        found = super(RecordingReader, self).exists(*parts)
        if found:
            self.keep(os.path.join(*parts))
        return found

    def realpath(self, *parts):
        if os.path.lexists(self.path(*parts)):
            self.keep(os.path.join(*parts))
        return super(RecordingReader, self).realpath(*parts)

    def keep(self, rel, content=False):
        """Copies the path ``rel`` (relative to the root) with the links on
        its way. ``content``: True copies a file's bytes, False makes an
        empty file, None copies a small regular file and empties the rest."""
        rel = os.path.normpath(rel.lstrip("/"))
        key = (rel, content)
        if key in self.kept or rel.startswith(".."):
            return
        self.kept.add(key)
        parts = rel.split(os.sep)
        done = []
        for index, part in enumerate(parts):
            source = os.path.join(self.root, *(done + [part]))
            target = os.path.join(self.dest, *(done + [part]))
            last = index == len(parts) - 1
            if os.path.islink(source):
                link = os.readlink(source)
                if not os.path.lexists(target):
                    _parent(target)
                    os.symlink(link, target)
                # Follow it, within the root, and go on from where it leads.
                resolved = os.path.realpath(source)
                inside = os.path.relpath(resolved, self.root)
                if inside.startswith(".."):
                    return
                self.keep(inside, content if last else False)
                done = inside.split(os.sep) if inside != "." else []
                continue
            if last:
                self._copy(source, target, content)
            elif os.path.isdir(source) and not os.path.isdir(target):
                os.makedirs(target)
            done.append(part)

    def _copy(self, source, target, content):
        if os.path.lexists(target) and not (content and os.path.isfile(target) and not os.path.getsize(target)):
            return
        _parent(target)
        try:
            mode = os.stat(source).st_mode
        except OSError:
            return
        if stat.S_ISDIR(mode):
            if not os.path.isdir(target):
                os.makedirs(target)
            return
        copy = stat.S_ISREG(mode) and (content or (content is None and os.path.getsize(source) <= MAX_LISTED_FILE))
        data = b""
        if copy:
            try:
                with open(source, "rb") as handle:
                    data = handle.read()
            except (IOError, OSError):
                # Unread (sysfs answers EINVAL for an unused GID's type):
                # absent in the snapshot, as the checks then take it.
                return
        with open(target, "wb") as handle:
            handle.write(data)
        if stat.S_ISREG(mode) and mode & stat.S_IXUSR:
            os.chmod(target, 0o755)


def _parent(path):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory)


def record_node(root, dest, nvidia_smi=None):
    """Gathers the node under ``root`` into the snapshot ``dest`` (which
    must not exist or be empty) and returns the facts gathered."""
    if os.path.exists(dest) and os.listdir(dest):
        raise ValueError("%s is not empty: record into a new directory" % dest)
    reader = RecordingReader(root, dest)
    facts = gather_node_facts(root, nvidia_smi=nvidia_smi, topology=True, reader=reader)
    topology = facts["topology"]
    if "exit_status" in topology:
        # What nvidia-smi topo -m printed and how it ended, failure included.
        returncode, output = topology["exit_status"], topology["raw"]
        path = os.path.join(reader.dest, TOPOLOGY_FILE)
        _parent(path)
        with open(path, "w") as handle:
            handle.write(output)
        stand_in = os.path.join(reader.dest, "usr/bin/nvidia-smi")
        if os.path.lexists(stand_in):
            os.remove(stand_in)
        _parent(stand_in)
        with open(stand_in, "w") as handle:
            handle.write(NVIDIA_SMI_STAND_IN % (returncode if 0 <= returncode < 256 else 1))
        os.chmod(stand_in, 0o755)
    for netdev, port in facts["roce_qos"].items():
        # What mlnx_qos -i printed, read back from the snapshot.
        _keep_output(reader, "mlnx_qos", netdev, port["mlnx_qos_raw"], port["mlnx_qos_source"])
    _record_port_counters(reader)
    return facts


def _keep_output(reader, recorded_as, netdev, text, source):
    """Writes what a node's tool printed as the snapshot's recording
    (host_tools.recording), unless it was read from one already (the
    reader copied that) or there is none."""
    if text is None or source == "recorded":
        return
    path = os.path.join(reader.dest, recording(recorded_as, netdev))
    _parent(path)
    with open(path, "w") as handle:
        handle.write(text)


def _record_port_counters(reader):
    """The RDMA ports' counters, read through the reader (so kept: what
    moved on a node can be read back from two snapshots of it) and, for an
    Ethernet port, what ``ethtool -S`` printed for its first netdev (the
    per-priority pause counters are in no file)."""
    printed = {}
    read_port_counters(reader, printed)
    for netdev, (text, source) in sorted(printed.items()):
        _keep_output(reader, "ethtool-S", netdev, text, source)
