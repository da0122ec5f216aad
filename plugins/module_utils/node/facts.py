# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Gather the facts of one GPU node from /proc and /sys.

Everything is read under a ``root`` directory, so the same code inspects the
node it runs on (``root='/'``), the host from a pod that mounts it at
``/host``, or a recorded snapshot of a node in the tests. Nothing here writes,
and nothing raises on a missing or malformed file: each gatherer records what
it could not read in ``facts['errors']`` and carries on.

This file uses the standard library only: it is imported by the Ansible
modules and, unchanged, by the in-pod commands of ``files/bin`` that run
where Ansible is not installed.
"""

from __future__ import absolute_import, division, print_function

import errno
import os
import re
import struct
import subprocess

from ..fabric.roce_qos import gather_roce_qos

__metaclass__ = type

# Rates in /sys/class/infiniband/*/ports/*/rate read like "400 Gb/sec (4X NDR)".
_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec")
# /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX [Open Kernel Module for ]x86_64  550.54.15  ..."
_NVRM_RE = re.compile(r"NVRM version:.*?\s([0-9]+\.[0-9]+(?:\.[0-9]+)?)\s")
# ofed_info is a shell script that embeds its version string.
_OFED_RE = re.compile(r"((?:MLNX_OFED_LINUX|OFED-internal|DOCA[-_A-Za-z]*)-[0-9][0-9A-Za-z.\-]*)")
_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
_GID_RE = re.compile(r"^[0-9a-fA-F]{4}(:[0-9a-fA-F]{4}){7}$")
# PCI express extended capability of Access Control Services, and the
# request/completion redirect bits of its control register, which send
# peer-to-peer traffic up to the root complex.
_PCI_EXT_CAP_ID_ACS = 0x000D
_ACS_CTRL_REDIRECT_BITS = {"request_redirect": 0x0004, "completion_redirect": 0x0008,
                           "egress_control": 0x0020}
_NVIDIA_SMI_TIMEOUT = 30
_KERNEL_VERSION = re.compile(r"^Linux version (\S+)")
DMABUF_MIN_DRIVER = (515,)
DMABUF_MIN_KERNEL = (5, 12)
_DEVICE_COLUMN_RE = re.compile(r"^(GPU|NIC)[0-9]+$")


# Where a pod sees the node's root: the host's, mounted at /host, in a probe;
# a node's recorded snapshot on the local test cluster.
ROOT_ENV = "MLINFRA_HOST_ROOT"


def node_root(environ):
    """The node root an in-pod command reads: $MLINFRA_HOST_ROOT, else /."""
    return environ.get(ROOT_ENV) or "/"


def natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"([0-9]+)", name)]


class NodeReader:
    """Reads files under a root directory and remembers what failed."""

    def __init__(self, root="/"):
        self.root = os.path.abspath(root or "/")
        self.errors = []

    def path(self, *parts):
        rel = os.path.join(*parts).lstrip("/")
        return os.path.join(self.root, rel)

    def exists(self, *parts):
        return os.path.exists(self.path(*parts))

    def read(self, *parts, **kwargs):
        """Text of a file, stripped; None if absent. Unreadable files are
        recorded as errors unless ``quiet`` is set (sysfs answers EINVAL for
        unused GID table entries, which is not an error)."""
        quiet = kwargs.get("quiet", False)
        target = self.path(*parts)
        try:
            with open(target, "rb") as handle:
                data = handle.read()
        except (IOError, OSError) as exc:
            if exc.errno != errno.ENOENT and not quiet:
                self.errors.append("%s: %s" % (self._display(target), exc.strerror or exc))
            return None
        return data.decode("utf-8", "replace").strip()

    def read_bytes(self, *parts):
        target = self.path(*parts)
        try:
            with open(target, "rb") as handle:
                return handle.read()
        except (IOError, OSError) as exc:
            if exc.errno != errno.ENOENT:
                self.errors.append("%s: %s" % (self._display(target), exc.strerror or exc))
            return None

    def read_int(self, *parts):
        text = self.read(*parts)
        if text is None:
            return None
        try:
            return int(text.split()[0], 0)
        except (ValueError, IndexError):
            self.errors.append("%s: not an integer: %r" % (self._display(self.path(*parts)), text[:40]))
            return None

    def listdir(self, *parts, **kwargs):
        """Sorted names; ``natural=True`` orders mlx5_2 before mlx5_10 (PCI
        addresses are hexadecimal and sort plainly)."""
        target = self.path(*parts)
        try:
            return sorted(os.listdir(target), key=natural_key if kwargs.get("natural") else None)
        except (IOError, OSError) as exc:
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                self.errors.append("%s: %s" % (self._display(target), exc.strerror or exc))
            return []

    def malformed(self, rel, content):
        self.errors.append("%s: malformed: %r" % ("/" + rel.lstrip("/"), content[:60]))

    def realpath(self, *parts):
        """The target of a sysfs link, expressed relative to the root."""
        resolved = os.path.realpath(self.path(*parts))
        if resolved == self.root:
            return "/"
        if resolved.startswith(self.root.rstrip("/") + "/"):
            return resolved[len(self.root.rstrip("/")):]
        return resolved

    def _display(self, target):
        """Paths in messages are shown as they are on the node."""
        if self.root != "/" and target.startswith(self.root):
            return target[len(self.root.rstrip("/")):] or "/"
        return target


def parse_rate_gbps(text):
    match = _RATE_RE.match(text or "")
    return float(match.group(1)) if match else None


def _state_name(text):
    """sysfs writes port states as "4: ACTIVE"; keep the name."""
    if not text:
        return None
    return text.split(":", 1)[-1].strip()


def gid_ipv4(gid):
    """The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d), else None."""
    parts = (gid or "").lower().split(":")
    if len(parts) != 8 or parts[:6] != ["0000"] * 5 + ["ffff"]:
        return None
    try:
        high, low = int(parts[6], 16), int(parts[7], 16)
    except ValueError:
        return None
    return "%d.%d.%d.%d" % (high >> 8, high & 0xFF, low >> 8, low & 0xFF)


def roce_v2_ipv4_gids(port):
    """The GID entries of a port that RoCE v2 over IPv4 uses (the ones NCCL
    2.21+ picks by itself, and NCCL_IB_GID_INDEX must name before that)."""
    return [entry for entry in port["gids"] if entry["type"] == "RoCE v2" and entry["ipv4"]]


def gather_kernel(reader):
    cmdline = reader.read("proc/cmdline") or ""
    # The release is in osrelease and at the head of /proc/version ("Linux
    # version 6.18.0-1.el9 (builder@...) ..."); a recording may hold one only.
    release = reader.read("proc/sys/kernel/osrelease", quiet=True)
    if not release:
        version = _KERNEL_VERSION.match(reader.read("proc/version", quiet=True) or "")
        release = version.group(1) if version else None
    return {
        "release": release,
        "cmdline": cmdline,
        "cmdline_args": cmdline.split(),
    }


def gather_iommu(reader, cmdline_args):
    groups = reader.listdir("sys/kernel/iommu_groups")
    # The group type says what the kernel really does: "identity" is
    # passthrough, "DMA"/"DMA-FQ" translate every DMA.
    types = {}
    for group in groups:
        kind = reader.read("sys/kernel/iommu_groups", group, "type")
        if kind:
            types[kind] = types.get(kind, 0) + 1
    params = {}
    for arg in cmdline_args:
        key, value = arg.partition("=")[::2]
        if key in ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough"):
            params[key] = value
    return {
        "cmdline": params,
        "groups": len(groups),
        "group_types": types,
        "units": reader.listdir("sys/class/iommu"),
    }


def gather_modules(reader, names):
    """Loaded state and version of kernel modules.

    /proc/modules lists loadable modules; a built-in driver appears only
    under /sys/module. The version file exists when the module declares one
    (OFED/DOCA and NVIDIA do; the in-tree mlx5 driver does not).
    """
    proc = {}
    text = reader.read("proc/modules")
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1].isdigit():
            proc[fields[0]] = {"size": fields[1], "refcount": fields[2],
                               "state": fields[4] if len(fields) > 4 else None}
        elif line.strip():
            reader.malformed("proc/modules", line)
    modules = {}
    for name in names:
        in_proc = name in proc
        # Only loadable modules have an initstate; a built-in driver has a
        # /sys/module directory without one.
        initstate = reader.read("sys/module", name, "initstate", quiet=True)
        builtin = not in_proc and initstate is None and reader.exists("sys/module", name)
        refcount = proc.get(name, {}).get("refcount", "")
        modules[name] = {
            "loaded": in_proc or initstate == "live" or builtin,
            "builtin": builtin,
            "version": reader.read("sys/module", name, "version", quiet=True),
            "srcversion": reader.read("sys/module", name, "srcversion", quiet=True),
            "refcount": int(refcount) if refcount.isdigit() else None,
        }
    return {"proc_modules_readable": text is not None, "modules": modules}


def gather_ofed(reader):
    for candidate in ("usr/bin/ofed_info", "usr/local/bin/ofed_info"):
        text = reader.read(candidate, quiet=True)
        if text:
            match = _OFED_RE.search(text)
            if match:
                return match.group(1).rstrip(":")
    release = reader.read("etc/mlnx-release", quiet=True)
    return release or None


def gather_nvidia(reader):
    version_text = reader.read("proc/driver/nvidia/version")
    driver = None
    open_module = False
    if version_text:
        match = _NVRM_RE.search(version_text)
        driver = match.group(1) if match else None
        if not match:
            reader.malformed("proc/driver/nvidia/version", version_text)
        open_module = "Open Kernel Module" in version_text
    gpus = []
    for pci in reader.listdir("proc/driver/nvidia/gpus"):
        info = {}
        text = reader.read("proc/driver/nvidia/gpus", pci, "information")
        for line in (text or "").splitlines():
            key, sep, value = line.partition(":")
            if sep:
                info[key.strip()] = value.strip()
        if text is not None and "Model" not in info:
            reader.malformed("proc/driver/nvidia/gpus/%s/information" % pci, text)
        gpus.append({
            "pci": pci,
            "model": info.get("Model"),
            "uuid": info.get("GPU UUID"),
            "minor": int(info["Device Minor"]) if info.get("Device Minor", "").isdigit() else None,
            "numa_node": reader.read_int("sys/bus/pci/devices", pci, "numa_node")
            if reader.exists("sys/bus/pci/devices", pci, "numa_node") else None,
            # Where it sits on the PCIe tree (node_rails pairs it with a NIC).
            "pci_path": reader.realpath("sys/bus/pci/devices", pci) if reader.exists("sys/bus/pci/devices", pci)
            else None,
        })
    return {
        "driver_version": driver,
        "open_kernel_module": open_module,
        "version_text": version_text,
        "gpus": gpus,
    }


def _gid_table(reader, dev, port):
    base = ("sys/class/infiniband", dev, "ports", port)
    entries = []
    for index in reader.listdir(*(base + ("gids",))):
        if not index.isdigit():
            continue
        gid = reader.read(*(base + ("gids", index)), quiet=True)
        if not gid or gid == _ZERO_GID:
            continue
        if not _GID_RE.match(gid):
            reader.malformed("/".join(base + ("gids", index)), gid)
            continue
        # Unused entries answer EINVAL on read: quiet, and None.
        gid_type = reader.read(*(base + ("gid_attrs", "types", index)), quiet=True)
        ndev = reader.read(*(base + ("gid_attrs", "ndevs", index)), quiet=True)
        entries.append({
            "index": int(index),
            "gid": gid,
            "type": gid_type,
            "ndev": ndev,
            "ipv4": gid_ipv4(gid),
        })
    entries.sort(key=lambda entry: entry["index"])
    return entries


def gather_rdma(reader):
    devices = []
    for dev in reader.listdir("sys/class/infiniband", natural=True):
        device_link = reader.realpath("sys/class/infiniband", dev, "device")
        pci = os.path.basename(device_link) if reader.exists("sys/class/infiniband", dev, "device") else None
        netdevs = reader.listdir("sys/class/infiniband", dev, "device", "net", natural=True)
        ports = []
        for port in reader.listdir("sys/class/infiniband", dev, "ports"):
            base = ("sys/class/infiniband", dev, "ports", port)
            rate = reader.read(*(base + ("rate",)))
            if rate is not None and parse_rate_gbps(rate) is None:
                reader.malformed("/".join(base + ("rate",)), rate)
            ports.append({
                "port": int(port) if port.isdigit() else port,
                "state": _state_name(reader.read(*(base + ("state",)))),
                "phys_state": _state_name(reader.read(*(base + ("phys_state",)))),
                "rate": rate,
                "rate_gbps": parse_rate_gbps(rate),
                "link_layer": reader.read(*(base + ("link_layer",))),
                "gids": _gid_table(reader, dev, port),
            })
        numa = reader.read_int("sys/class/infiniband", dev, "device", "numa_node") \
            if reader.exists("sys/class/infiniband", dev, "device", "numa_node") else None
        # A virtual function's rail is its physical function's port.
        physfn = os.path.basename(reader.realpath("sys/class/infiniband", dev, "device", "physfn")) \
            if reader.exists("sys/class/infiniband", dev, "device", "physfn") else None
        devices.append({
            "name": dev,
            "pci": pci,
            "pci_path": device_link if pci else None,
            "physfn": physfn,
            "numa_node": numa,
            "netdevs": netdevs,
            "hca_type": reader.read("sys/class/infiniband", dev, "hca_type", quiet=True),
            "fw_ver": reader.read("sys/class/infiniband", dev, "fw_ver", quiet=True),
            "node_type": _state_name(reader.read("sys/class/infiniband", dev, "node_type", quiet=True)),
            "ports": ports,
        })
    return {"class_present": reader.exists("sys/class/infiniband"), "devices": devices,
            "uverbs": reader.listdir("dev/infiniband")}


def gather_netdevs(reader):
    netdevs = {}
    for name in reader.listdir("sys/class/net", natural=True):
        netdevs[name] = {
            "mtu": reader.read_int("sys/class/net", name, "mtu") if reader.exists("sys/class/net", name, "mtu") else None,
            "operstate": reader.read("sys/class/net", name, "operstate", quiet=True),
        }
    return netdevs


def gather_default_route_interface(reader):
    """The interface of the IPv4 default route (/proc/net/route)."""
    text = reader.read("proc/net/route", quiet=True)
    best = None
    for line in (text or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            reader.malformed("proc/net/route", line)
            continue
        if fields[1] == "00000000" and fields[7] == "00000000":
            metric = int(fields[6]) if fields[6].isdigit() else 0
            if best is None or metric < best[0]:
                best = (metric, fields[0])
    return best[1] if best else None


def parse_limit(value):
    if value is None:
        return None
    if value == "unlimited":
        return "unlimited"
    try:
        return int(value)
    except ValueError:
        return None


def gather_memlock(reader):
    text = reader.read("proc/self/limits")
    for line in (text or "").splitlines():
        if line.startswith("Max locked memory"):
            fields = line[len("Max locked memory"):].split()
            if len(fields) >= 2 and None not in (parse_limit(fields[0]), parse_limit(fields[1])):
                return {"soft": parse_limit(fields[0]), "hard": parse_limit(fields[1]),
                        "unit": fields[2] if len(fields) > 2 else "bytes"}
            reader.malformed("proc/self/limits", line)
            break
    else:
        if text is not None:
            reader.malformed("proc/self/limits", "no 'Max locked memory' line")
    return {"soft": None, "hard": None, "unit": None}


# CAP_IPC_LOCK (linux/capability.h): lets a process lock memory beyond its
# memlock limit, which registering RDMA buffers does.
CAP_IPC_LOCK = 14


def gather_capabilities(reader):
    """The effective capabilities of the reading process (in a pod: the
    pod's), from the CapEff line of /proc/self/status."""
    for line in (reader.read("proc/self/status", quiet=True) or "").splitlines():
        if line.startswith("CapEff:"):
            try:
                effective = int(line.split(":", 1)[1].strip(), 16)
            except ValueError:
                reader.malformed("proc/self/status", line)
                break
            return {"effective": "%016x" % effective, "ipc_lock": bool(effective >> CAP_IPC_LOCK & 1)}
    return {"effective": None, "ipc_lock": None}


def gather_dev_infiniband(reader):
    """The character devices of /dev/infiniband (uverbsN, rdma_cm, umadN):
    verbs needs them inside the process's mount namespace."""
    present = reader.exists("dev/infiniband")
    return {"present": present, "entries": reader.listdir("dev/infiniband", natural=True) if present else []}


def cpu_set(text):
    """The CPUs of a kernel CPU list ("0-31,64-95"), or None if it is not one."""
    cpus = set()
    for chunk in (text or "").split(","):
        chunk = chunk.strip()
        if not chunk:
            continue
        low, high = chunk.partition("-")[::2]
        try:
            cpus.update(range(int(low), int(high) + 1) if high else (int(low),))
        except ValueError:
            return None
    return cpus


def _parse_cpu_list(text, reader=None, rel=None):
    cpus = cpu_set(text)
    if cpus is None and reader is not None:
        reader.malformed(rel, text)
    return len(cpus) if cpus else None


def gather_cpus(reader):
    """CPUs this node (or pod) may use: the online CPUs, narrowed by the
    cpuset and the cgroup v2 quota when they say less."""
    online = _parse_cpu_list(reader.read("sys/devices/system/cpu/online"), reader, "sys/devices/system/cpu/online")
    allowed = allowed_list = None
    for line in (reader.read("proc/self/status", quiet=True) or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            allowed_list = line.split(":", 1)[1].strip()
            allowed = _parse_cpu_list(allowed_list)
    quota = None
    cpu_max = reader.read("sys/fs/cgroup/cpu.max", quiet=True)
    if cpu_max:
        fields = cpu_max.split()
        if len(fields) == 2 and fields[0] != "max":
            try:
                quota = max(1, int(int(fields[0]) // int(fields[1])))
            except (ValueError, ZeroDivisionError):
                quota = None
    usable = [value for value in (online, allowed, quota) if value]
    return {"online": online, "cpuset": allowed, "cgroup_quota": quota,
            "usable": min(usable) if usable else None, "allowed_list": allowed_list}


def gather_numa(reader):
    """Each NUMA node's CPU list (sysfs), by node number."""
    nodes = {}
    for name in reader.listdir("sys/devices/system/node", natural=True):
        if re.match(r"^node[0-9]+$", name):
            nodes[int(name[4:])] = reader.read("sys/devices/system/node", name, "cpulist")
    return {"nodes": nodes}


# Where the kubelet keeps its configuration when its command line does not
# say: kubeadm and most distributions, then OpenShift (a JSON document).
KUBELET_CONFIGS = ("var/lib/kubelet/config.yaml", "etc/kubernetes/kubelet.conf")
KUBELET_POLICIES = ("cpuManagerPolicy", "memoryManagerPolicy", "topologyManagerPolicy", "topologyManagerScope")
KUBELET_DEFAULTS = {"cpuManagerPolicy": "none", "memoryManagerPolicy": "None", "topologyManagerPolicy": "none",
                    "topologyManagerScope": "container"}
# The command-line flags of the same settings (deprecated, still honoured).
_KUBELET_FLAGS = {"--cpu-manager-policy": "cpuManagerPolicy", "--memory-manager-policy": "memoryManagerPolicy",
                  "--topology-manager-policy": "topologyManagerPolicy",
                  "--topology-manager-scope": "topologyManagerScope"}
# Top-level scalars, alike in YAML and JSON ("key": "value" or key: value).
_KUBELET_SETTING_RE = r'^\s{0,2}"?%s"?\s*:\s*"?([A-Za-z-]+)"?\s*,?\s*$'


# The kubelet's processes, where systemd runs it as kubelet.service (kubeadm,
# OpenShift): cgroup v2, then v1's systemd hierarchy.
KUBELET_CGROUP_PROCS = ("sys/fs/cgroup/system.slice/kubelet.service/cgroup.procs",
                        "sys/fs/cgroup/systemd/system.slice/kubelet.service/cgroup.procs")


def _kubelet_process(reader):
    """(pid, arguments) of the running kubelet, or None. Found through its
    systemd unit's cgroup rather than by listing /proc: one file read, and
    a node's recording (node_record) keeps only that."""
    for rel in KUBELET_CGROUP_PROCS:
        for pid in (reader.read(rel, quiet=True) or "").split():
            arguments = (reader.read_bytes("proc", pid, "cmdline") or b"").decode("utf-8", "replace")
            arguments = [argument for argument in arguments.split("\0") if argument]
            if arguments and os.path.basename(arguments[0]) == "kubelet":
                return pid, arguments
    return None


def _kubelet_flags(arguments):
    """--name=value and --name value, as {name: value} (a flag followed by
    another flag has no value: "")."""
    flags, pending = {}, None
    for argument in arguments[1:]:
        if pending and not argument.startswith("--"):
            flags[pending], pending = argument, None
            continue
        if pending:
            flags[pending], pending = "", None
        if argument.startswith("--"):
            name, sep, value = argument.partition("=")
            if sep:
                flags[name] = value
            else:
                pending = name
    return flags


def gather_kubelet(reader):
    """The kubelet's CPU, memory and topology manager policies: from the
    running kubelet where its unit's cgroup names it (its --config file read
    through /proc/<pid>/root, so a probe that sees the host's /proc and /sys
    needs no mount of the kubelet's directories; its flags win), else from
    the usual configuration files, else from the managers' state files.
    Policies a configuration leaves unset are the kubelet's defaults; None
    where nothing was found."""
    found = dict((name, None) for name in KUBELET_POLICIES)
    process = _kubelet_process(reader)
    flags = _kubelet_flags(process[1]) if process else {}
    candidates = []
    if process and flags.get("--config"):
        candidates.append(("proc/%s/root/%s" % (process[0], flags["--config"].lstrip("/")), flags["--config"]))
    candidates += [(rel, "/" + rel) for rel in KUBELET_CONFIGS]
    source = None
    for rel, shown in candidates:
        text = reader.read(rel, quiet=True)
        if text is None:
            continue
        source = shown
        for name in KUBELET_POLICIES:
            match = re.search(_KUBELET_SETTING_RE % name, text, re.MULTILINE)
            found[name] = match.group(1) if match else KUBELET_DEFAULTS[name]
        break
    for flag, name in _KUBELET_FLAGS.items():
        if flags.get(flag):
            found[name] = flags[flag]
            source = source or "the kubelet's command line"
    # The managers record the policy they run with; a kubelet restarted with
    # a new policy refuses to start until its state file is removed.
    for state, name in (("cpu_manager_state", "cpuManagerPolicy"), ("memory_manager_state", "memoryManagerPolicy")):
        match = re.search(r'"policyName"\s*:\s*"([A-Za-z-]+)"',
                          reader.read("var/lib/kubelet", state, quiet=True) or "")
        if match and found[name] is None:
            found[name] = match.group(1)
            source = source or "/var/lib/kubelet/" + state
    return dict(found, source=source)


def _find_ext_capability(config, cap_id):
    """Offset of a PCIe extended capability in a config space dump, or None."""
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(config) - 4 and offset not in seen:
        seen.add(offset)
        header = struct.unpack_from("<I", config, offset)[0]
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == cap_id:
            return offset
        offset = (header >> 20) & 0xFFC
    return None


def pci_acs_state(reader, bdf):
    """ACS control bits of one PCI function, from its config space.

    Reading past the first 64 bytes of config space needs CAP_SYS_ADMIN:
    without it the kernel returns a short read and the state is unknown.
    """
    config = reader.read_bytes("sys/bus/pci/devices", bdf, "config")
    if config is None:
        return {"readable": False, "reason": "no config space file"}
    if len(config) <= 256:
        return {"readable": False, "reason": "extended config space not readable (needs root)"}
    offset = _find_ext_capability(config, _PCI_EXT_CAP_ID_ACS)
    if offset is None:
        return {"readable": True, "acs": False}
    control = struct.unpack_from("<H", config, offset + 6)[0]
    bits = dict((name, bool(control & mask)) for name, mask in _ACS_CTRL_REDIRECT_BITS.items())
    return {"readable": True, "acs": True, "control": control, "redirect": bits}


def _upstream_bridges(pci_path):
    """PCI functions above a device in its sysfs path, nearest first."""
    parts = [part for part in (pci_path or "").split("/") if re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", part)]
    return list(reversed(parts[:-1]))


def gather_pci_acs(reader, gpus, rdma_devices):
    """ACS state of every bridge above the GPUs and RDMA NICs."""
    endpoints = {}
    for gpu in gpus:
        endpoints[gpu["pci"]] = reader.realpath("sys/bus/pci/devices", gpu["pci"])
    for dev in rdma_devices:
        if dev.get("pci_path"):
            endpoints[dev["pci"]] = dev["pci_path"]
    bridges = {}
    for path in endpoints.values():
        for bridge in _upstream_bridges(path):
            if bridge not in bridges:
                bridges[bridge] = pci_acs_state(reader, bridge)
    return {"endpoints": endpoints, "bridges": bridges}


def _version_tuple(text):
    return tuple(int(part) for part in re.findall(r"[0-9]+", text or "")[:3])


def gather_gpudirect(kernel, modules, nvidia):
    """How GPU memory can be registered with the RDMA NICs: a peer-memory
    module, or DMA-BUF (NVIDIA's open kernel modules from 515 on export GPU
    memory as DMA-BUF; the kernel imports it into RDMA drivers from 5.12)."""
    peermem = [name for name in ("nvidia_peermem", "nv_peer_mem") if modules[name]["loaded"]]
    driver = nvidia["driver_version"]
    if not driver:
        dmabuf, reason = False, "no NVIDIA driver version in /proc/driver/nvidia/version"
    elif not nvidia["open_kernel_module"]:
        dmabuf, reason = False, "NVIDIA driver %s is the proprietary flavour; DMA-BUF needs the open kernel modules" % driver
    elif _version_tuple(driver) < DMABUF_MIN_DRIVER:
        dmabuf, reason = False, "NVIDIA driver %s is older than 515" % driver
    elif not kernel["release"]:
        # Unknown is not old: said as unknown, never compared.
        dmabuf, reason = None, ("the kernel's release could not be read (/proc/sys/kernel/osrelease, /proc/version), "
                                "so whether it imports DMA-BUF (5.12 and later) is unknown")
    elif _version_tuple(kernel["release"]) < DMABUF_MIN_KERNEL:
        dmabuf, reason = False, "kernel %s is older than 5.12" % kernel["release"]
    else:
        dmabuf, reason = True, "NVIDIA open kernel module %s on kernel %s" % (driver, kernel["release"])
    return {"peermem_modules": peermem, "dmabuf": dmabuf, "dmabuf_reason": reason}


def find_nvidia_smi(reader, explicit=None):
    """The nvidia-smi to run: the one given, the node root's own (a snapshot
    carries a stand-in that prints what the node printed), or PATH's."""
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    if reader.root != "/":
        for candidate in ("usr/bin/nvidia-smi", "usr/local/bin/nvidia-smi"):
            path = reader.path(candidate)
            if os.access(path, os.X_OK) and _runs(path):
                return path
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(directory, "nvidia-smi")
        if directory and os.access(path, os.X_OK):
            return path
    return None


def _runs(path):
    """A host binary seen through /host may not run inside a pod (its
    libraries are not there); a quick --help tells."""
    try:
        # Shared with the in-pod commands, which run without Ansible: there is
        # no AnsibleModule.run_command to call.
        return subprocess.call([path, "--help"], stdout=subprocess.DEVNULL,  # pylint: disable=ansible-bad-function
                               stderr=subprocess.DEVNULL, timeout=_NVIDIA_SMI_TIMEOUT) == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _topology_cells(line):
    """nvidia-smi separates the matrix's columns with tabs (and leaves some
    cells empty); fall back to blanks for output that lost its tabs."""
    if "\t" in line:
        return [cell.strip() for cell in re.split(r"\t+", line.strip())]
    return line.split()


def parse_topology(text):
    """Parse the matrix of ``nvidia-smi topo -m``.

    Returns the GPU-to-GPU and GPU-to-NIC links, the NIC legend (NIC0 ->
    mlx5_0) and the CPU/NUMA affinity of each GPU.
    """
    # The header is underlined with terminal escapes; a copy pasted from a
    # terminal may have lost the escape character itself.
    lines = [re.sub(r"\x1b?\[[0-9;]*m", "", line).rstrip() for line in (text or "").splitlines()]
    header = None
    rows = {}
    legend = {}
    for line in lines:
        stripped = line.strip()
        if header is None and stripped.startswith("GPU0"):
            header = _topology_cells(stripped)
            continue
        nic_match = re.match(r"^\s*(NIC[0-9]+):\s*(\S+)", line)
        if nic_match:
            legend[nic_match.group(1)] = nic_match.group(2)
            continue
        if header and re.match(r"^(GPU|NIC)[0-9]+\s", stripped):
            cells = _topology_cells(stripped)
            rows[cells[0]] = cells[1:]
    gpu_links, nic_links, affinity = {}, {}, {}
    for name, cells in rows.items():
        if not name.startswith("GPU") or not header:
            continue
        device_columns = [col for col in header if _DEVICE_COLUMN_RE.match(col)]
        for col, value in zip(device_columns, cells):
            if col.startswith("GPU") and col != name:
                gpu_links.setdefault(name, {})[col] = value
            elif col.startswith("NIC"):
                nic_links.setdefault(name, {})[legend.get(col, col)] = value
        extra = cells[len(device_columns):]
        if extra:
            affinity[name] = {"cpu_affinity": extra[0], "numa_affinity": extra[1] if len(extra) > 1 else None}
    return {"gpus": sorted([name for name in rows if name.startswith("GPU")], key=lambda n: int(n[3:])),
            "gpu_links": gpu_links, "nic_links": nic_links, "nic_legend": legend,
            "affinity": affinity}


def topology_output(binary):
    """(exit status, what it printed) of ``<binary> topo -m``: its output,
    or on failure its error output (or the error of starting it, -1)."""
    try:
        # No AnsibleModule here either (see _runs).
        proc = subprocess.run([binary, "topo", "-m"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,  # pylint: disable=ansible-bad-function
                              timeout=_NVIDIA_SMI_TIMEOUT, universal_newlines=True, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return -1, str(exc)
    return proc.returncode, proc.stdout if proc.returncode == 0 else (proc.stderr or proc.stdout)


def gather_topology(reader, nvidia_smi=None):
    binary = find_nvidia_smi(reader, nvidia_smi)
    if not binary:
        return {"available": False, "reason": "nvidia-smi not found"}
    returncode, output = topology_output(binary)
    # What it printed and how it ended, kept whatever the outcome: a
    # recording (node_record) replays both.
    ran = {"nvidia_smi": binary, "exit_status": returncode, "raw": output}
    if returncode == -1:
        return dict(ran, available=False, reason="%s topo -m: %s" % (binary, output))
    if returncode != 0:
        return dict(ran, available=False,
                    reason="%s topo -m exited %d: %s" % (binary, returncode, output.strip()[:200]))
    parsed = parse_topology(output)
    parsed.update(ran, available=True)
    return parsed


# Modules whose state the checks read.
MODULE_NAMES = ("mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "rdma_cm",
                "nvidia", "nvidia_peermem", "nv_peer_mem", "nvidia_uvm")


def gather_node_facts(root="/", nvidia_smi=None, topology=True, reader=None):
    """All facts of one node, as a JSON-serialisable dict. ``reader``: a
    NodeReader of ``root`` of the caller's (node_record's, which copies what
    is read)."""
    reader = reader or NodeReader(root)
    kernel = gather_kernel(reader)
    nvidia = gather_nvidia(reader)
    rdma = gather_rdma(reader)
    modules = gather_modules(reader, MODULE_NAMES)
    facts = {
        "root": reader.root,
        "kernel": kernel,
        "iommu": gather_iommu(reader, kernel["cmdline_args"]),
        "modules": modules,
        "gpudirect": gather_gpudirect(kernel, modules["modules"], nvidia),
        "ofed_version": gather_ofed(reader),
        "nvidia": nvidia,
        "rdma": rdma,
        "netdevs": gather_netdevs(reader),
        "default_route_interface": gather_default_route_interface(reader),
        "memlock": gather_memlock(reader),
        "capabilities": gather_capabilities(reader),
        "dev_infiniband": gather_dev_infiniband(reader),
        "roce_qos": gather_roce_qos(reader, rdma["devices"]),
        "cpus": gather_cpus(reader),
        "numa": gather_numa(reader),
        "kubelet": gather_kubelet(reader),
        "pci_acs": gather_pci_acs(reader, nvidia["gpus"], rdma["devices"]),
        "topology": gather_topology(reader, nvidia_smi) if topology else
        {"available": False, "reason": "not gathered"},
    }
    facts["errors"] = reader.errors
    return facts
