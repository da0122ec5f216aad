# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The NCCL and launch environment for one node, from its facts.

The rule: set a variable only where there is evidence that NCCL's (or
torchrun's) own default is worse, and say why; every variable that is left
unset gets its reason too. A user value always wins.

Standard library only: shared by the ``nccl_env`` module and the in-pod
commands ``mlinfra autodetect`` (the autodetect init container, which writes
nccl.env with render_env_file) and ``mlinfra train`` (which reads it back
with read_env_file).
"""

from __future__ import absolute_import, division, print_function

import glob
import os
import re
import shlex
import sys

from ..node.facts import roce_v2_ipv4_gids

__metaclass__ = type

TRANSPORT_MODES = ("auto", "rdma", "tcp")

# NCCL 2.21 picks a RoCE v2, IPv4 GID per device by itself when
# NCCL_IB_GID_INDEX is unset (NCCL_IB_ROCE_VERSION_NUM=2 and
# NCCL_IB_ADDR_FAMILY=AF_INET are its defaults); older NCCL takes index 0,
# a RoCE v1 link-local entry, unless told otherwise.
NCCL_PER_DEVICE_GID = (2, 21, 0)

# The variables this module decides on, in the order they are reported.
VARIABLES = ("NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX",
             "NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL", "GPUS_PER_NODE", "OMP_NUM_THREADS")

# What a user value may be named: NCCL's own variables and the others above.
# Names are written unquoted into nccl.env, which every shell of a pod reads,
# so nothing else gets that far.
OVERRIDE_NAME = re.compile(r"^NCCL_[A-Z0-9_]+$")


def _kind_of(value):
    # In words, not the class: Ansible hands over its own list and dict
    # classes (_AnsibleLazyTemplateList, ...), which mean nothing to a user.
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict) or hasattr(value, "keys"):
        return "a mapping"
    if isinstance(value, (list, tuple)) or hasattr(value, "__iter__"):
        return "a list"
    return type(value).__name__


# The longest value an override may have. NCCL's own values are short (the
# longest, NCCL_IB_HCA or NCCL_SOCKET_IFNAME, list a few dozen devices); a
# value goes into every pod's environment, where one string over 128 KiB
# stops every exec in the container ("Argument list too long").
OVERRIDE_MAX_LENGTH = 4096


def override_error(name, value):
    """Why a user value cannot go into nccl.env, or None when it can."""
    if not isinstance(name, str) or not (OVERRIDE_NAME.match(name) or name in VARIABLES):
        return "%r is not an NCCL variable name (NCCL_ and capitals, digits, '_'; or one of %s)" % (
            name, ", ".join(n for n in VARIABLES if not n.startswith("NCCL_")))
    if value is not None and (not isinstance(value, (str, int, float)) or isinstance(value, bool)):
        return "the value of %s must be text or a number, got %s" % (name, _kind_of(value))
    if value is not None and re.search(r"[\x00-\x1f\x7f]", str(value)):
        return "the value of %s holds a line break or another control character" % name
    if value is not None and len(str(value)) > OVERRIDE_MAX_LENGTH:
        return "the value of %s is %d characters long, more than %d" % (name, len(str(value)), OVERRIDE_MAX_LENGTH)
    if name == "NCCL_IB_TC" and value is not None and not re.match(r"^(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])$",
                                                                   str(value).strip()):
        # The node checks work out NCCL's RoCE priority from it (roce_lossless).
        return "the value of NCCL_IB_TC is a traffic class byte, 0 to 255 (such as 106: DSCP 26), got %r" % (value,)
    return None


# Interfaces NCCL never picks by itself for its sockets.
_NCCL_SKIPPED_IFACES = ("lo", "docker", "virbr")


def parse_version(text):
    numbers = re.findall(r"[0-9]+", text or "")
    return tuple(int(n) for n in numbers[:3]) if len(numbers) >= 2 else None


def version_string(version):
    return ".".join(str(part) for part in version) if version else None


def find_nccl_version(environ=None, search_paths=None):
    """(version tuple, where it was found), or (None, reason).

    pip installs NCCL as the nvidia-nccl-cu* wheel that torch depends on;
    NVIDIA's containers export NCCL_VERSION; system packages leave a
    versioned libnccl.so.2.X.Y.
    """
    environ = os.environ if environ is None else environ
    # The wheel first: torch loads the NCCL of its nvidia-nccl wheel even in
    # images whose NCCL_VERSION names a different system NCCL (seen on an
    # H200 host: NCCL_VERSION=2.28.3, torch's wheel 2.28.9).
    paths = list(sys.path) if search_paths is None else list(search_paths)
    for path in paths:
        for dist in sorted(glob.glob(os.path.join(path, "nvidia_nccl_cu*-*.dist-info")), reverse=True):
            version = parse_version(os.path.basename(dist).split("-", 1)[1])
            if version:
                return version, os.path.basename(dist)
    if parse_version(environ.get("NCCL_VERSION")):
        return parse_version(environ["NCCL_VERSION"]), "NCCL_VERSION in the environment"
    lib_dirs = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/local/lib",
                "/usr/local/cuda/lib64"] if search_paths is None else []
    for directory in lib_dirs:
        for lib in sorted(glob.glob(os.path.join(directory, "libnccl.so.2.*")), reverse=True):
            version = parse_version(os.path.basename(lib)[len("libnccl.so."):])
            if version:
                return version, lib
    return None, "no NCCL found (no NCCL_VERSION, nvidia-nccl wheel or libnccl.so.2.x.y)"


def usable_rdma_ports(facts):
    """(device, port, netdev) of every RDMA port NCCL can use here: active,
    and for RoCE, with its netdev present in this network namespace."""
    usable, rejected = [], []
    netdevs = facts["netdevs"]
    for dev in facts["rdma"]["devices"]:
        for port in dev["ports"]:
            where = "%s:%s" % (dev["name"], port["port"])
            if port["state"] != "ACTIVE":
                rejected.append("%s is %s" % (where, port["state"]))
                continue
            if port["link_layer"] == "Ethernet":
                names = [n for n in dev["netdevs"] if n in netdevs] or \
                    [e["ndev"] for e in port["gids"] if e.get("ndev") in netdevs]
                if not names:
                    rejected.append("%s has no netdev in this network namespace" % where)
                    continue
                usable.append((dev, port, names[0]))
            else:
                usable.append((dev, port, (dev["netdevs"] or [None])[0]))
    return usable, rejected


class Decision:
    """One variable: its value (None = left unset) and why."""

    def __init__(self, name, value, reason, source="detected"):
        self.name, self.value, self.reason, self.source = name, value, reason, source

    def as_dict(self):
        return {"name": self.name, "value": self.value, "set": self.value is not None,
                "source": self.source, "reason": self.reason}


def _socket_candidates(facts):
    return [name for name in sorted(facts["netdevs"])
            if not name.startswith(_NCCL_SKIPPED_IFACES)]


def decide_transport(mode, usable, rejected):
    if mode == "tcp":
        return "tcp", "tcp requested", []
    if usable:
        return "rdma", "%d usable RDMA port(s)" % len(usable), []
    why = "no usable RDMA port" + (": " + "; ".join(rejected) if rejected else " (no RDMA devices)")
    if mode == "rdma":
        return "tcp", why, ["rdma requested but %s; NCCL would silently fall back to sockets" % why]
    return "tcp", why, []


def decide_ib_disable(transport, facts):
    if transport == "rdma":
        return Decision("NCCL_IB_DISABLE", None, "RDMA transport: NCCL enables its IB/RoCE transport by default")
    if facts["rdma"]["devices"]:
        return Decision("NCCL_IB_DISABLE", "1",
                        "tcp transport while RDMA devices are visible: NCCL would otherwise try them")
    return Decision("NCCL_IB_DISABLE", None, "no RDMA devices: NCCL uses sockets by itself")


def decide_ib_hca(transport, facts, usable, rejected):
    if transport != "rdma":
        return Decision("NCCL_IB_HCA", None, "not using RDMA")
    # "=" makes NCCL match whole names: without it mlx5_1 also selects mlx5_10..mlx5_19.
    value = "=" + ",".join("%s:%s" % (dev["name"], port["port"]) for dev, port, netdev in usable)
    if rejected:
        return Decision("NCCL_IB_HCA", value,
                        "only these ports are usable here (%s); NCCL would otherwise try all %d visible device(s)"
                        % ("; ".join(rejected), len(facts["rdma"]["devices"])))
    return Decision("NCCL_IB_HCA", None,
                    "all %d RDMA port(s) usable (%s); NCCL uses them all by default"
                    % (len(usable), value.lstrip("=")))


def decide_socket_ifname(facts):
    default_iface = facts.get("default_route_interface")
    candidates = _socket_candidates(facts)
    if not default_iface:
        return Decision("NCCL_SOCKET_IFNAME", None, "no IPv4 default route found; NCCL picks an interface itself")
    others = [name for name in candidates if name != default_iface]
    if not others:
        return Decision("NCCL_SOCKET_IFNAME", None,
                        "%s is the only candidate interface; NCCL picks it by itself" % default_iface)
    # NCCL prefers ib* interfaces and otherwise takes the first it finds;
    # the RDMA netdevs (net1..) of an SR-IOV pod need not route to the other
    # pods, while the default-route interface does.
    return Decision("NCCL_SOCKET_IFNAME", "=" + default_iface,
                    "default-route interface; NCCL could otherwise pick one of %s for its bootstrap sockets"
                    % ", ".join(others))


def decide_gid_index(transport, usable, nccl_version):
    roce = [(dev, port) for dev, port, netdev in usable if port["link_layer"] == "Ethernet"]
    if transport != "rdma" or not roce:
        return Decision("NCCL_IB_GID_INDEX", None, "no RoCE ports in use")
    indices = {}
    for dev, port in roce:
        entries = roce_v2_ipv4_gids(port)
        indices["%s:%s" % (dev["name"], port["port"])] = entries[0]["index"] if entries else None
    listing = ", ".join("%s=%s" % item for item in sorted(indices.items()))
    distinct = set(indices.values())
    if None in distinct:
        return Decision("NCCL_IB_GID_INDEX", None,
                        "some RoCE ports have no RoCE v2 IPv4 GID (%s): no index is right for them" % listing)
    if len(distinct) > 1:
        return Decision("NCCL_IB_GID_INDEX", None,
                        "RoCE v2 GIDs sit at different indices (%s): one NCCL_IB_GID_INDEX would be wrong for "
                        "some device%s" % (listing, "" if nccl_version and nccl_version >= NCCL_PER_DEVICE_GID else
                                           "; NCCL %s may not pick per device (2.21 and later do): use NCCL "
                                           "2.21 or later" % (version_string(nccl_version) or "of unknown version")))
    index = distinct.pop()
    if nccl_version and nccl_version >= NCCL_PER_DEVICE_GID:
        return Decision("NCCL_IB_GID_INDEX", None,
                        "NCCL %s picks the RoCE v2 IPv4 GID of each device by itself (index %d here)"
                        % (version_string(nccl_version), index))
    return Decision("NCCL_IB_GID_INDEX", str(index),
                    "RoCE v2 IPv4 GID at index %d on every device (%s); NCCL %s would default to index 0"
                    % (index, listing, version_string(nccl_version) or "of unknown version"))


def gpudirect_available(facts):
    gpudirect = facts["gpudirect"]
    return bool(gpudirect["peermem_modules"] or gpudirect["dmabuf"])


def decide_gdr_level(transport, facts):
    if transport != "rdma":
        return Decision("NCCL_NET_GDR_LEVEL", None, "not using RDMA")
    gpudirect = facts["gpudirect"]
    available = gpudirect_available(facts)
    how = ("%s loaded" % gpudirect["peermem_modules"][0]) if gpudirect["peermem_modules"] else \
        "DMA-BUF: " + gpudirect["dmabuf_reason"]
    if available:
        return Decision("NCCL_NET_GDR_LEVEL", None,
                        "GPUDirect RDMA available (%s); NCCL enables it by itself for each GPU-NIC pair close "
                        "enough in the PCI topology" % how)
    return Decision("NCCL_NET_GDR_LEVEL", None,
                    "GPUDirect RDMA not available (%s); NCCL stages through host memory by itself" % how)


def decide_p2p_level(facts):
    topo = facts.get("topology") or {}
    if not topo.get("available"):
        return Decision("NCCL_P2P_LEVEL", None, "topology unknown; NCCL probes peer-to-peer access itself")
    links = sorted(set(link for peers in topo["gpu_links"].values() for link in peers.values()))
    return Decision("NCCL_P2P_LEVEL", None,
                    "NCCL reads the GPU topology (%s) and chooses NVLink peer-to-peer by itself"
                    % (", ".join(links) or "one GPU"))


def decide_gpus_per_node(facts):
    gpus = len(facts["nvidia"]["gpus"])
    if not gpus:
        return Decision("GPUS_PER_NODE", None, "no GPUs found")
    return Decision("GPUS_PER_NODE", str(gpus), "%d GPU(s) in /proc/driver/nvidia/gpus" % gpus)


def decide_omp_threads(facts):
    cpus = facts["cpus"]["usable"]
    gpus = len(facts["nvidia"]["gpus"]) or 1
    if not cpus:
        return Decision("OMP_NUM_THREADS", None, "CPU count unknown")
    threads = max(1, cpus // gpus)
    # torchrun sets OMP_NUM_THREADS=1 for every worker when it is unset.
    return Decision("OMP_NUM_THREADS", str(threads),
                    "%d usable CPU(s) / %d process(es) per node; torchrun would otherwise set 1" % (cpus, gpus))


def compute_nccl_env(facts, mode="auto", overrides=None, environ=None, nccl_version=None):
    """Decide every variable. ``overrides`` (user values) always win, a value
    of None removing the variable; ``environ`` (variables already set where
    the launch happens) wins over detection."""
    if mode not in TRANSPORT_MODES:
        raise ValueError("mode must be one of %s, got %r" % (", ".join(TRANSPORT_MODES), mode))
    usable, rejected = usable_rdma_ports(facts)
    transport, transport_reason, errors = decide_transport(mode, usable, rejected)
    decisions = [
        decide_ib_disable(transport, facts),
        decide_ib_hca(transport, facts, usable, rejected),
        decide_socket_ifname(facts),
        decide_gid_index(transport, usable, nccl_version),
        decide_gdr_level(transport, facts),
        decide_p2p_level(facts),
        decide_gpus_per_node(facts),
        decide_omp_threads(facts),
    ]
    overrides = overrides or {}
    environ = environ or {}
    refused = [error for error in (override_error(name, value) for name, value in overrides.items()) if error]
    if refused:
        raise ValueError("; ".join(refused))
    for decision in decisions:
        if decision.name in environ:
            decision.value, decision.source = environ[decision.name], "environment"
            decision.reason = "already set where the job runs; kept (detected: %s)" % decision.reason
    for name, value in overrides.items():
        match = [d for d in decisions if d.name == name]
        reason = "left out by the user" if value is None else "set by the user"
        if match:
            decision = match[0]
            reason += " (detected: %s)" % decision.reason
        else:
            decision = Decision(name, None, "")
            decisions.append(decision)
        decision.value = None if value is None else str(value)
        decision.source, decision.reason = "user", reason
    env = dict((d.name, d.value) for d in decisions if d.value is not None)
    return {
        "transport": transport,
        "gpus": len(facts["nvidia"]["gpus"]),
        "gpudirect": gpudirect_available(facts) if transport == "rdma" else None,
        "transport_reason": transport_reason,
        "env": env,
        "details": [d.as_dict() for d in decisions],
        "nccl_version": version_string(nccl_version),
        "rdma_ports": [{"device": dev["name"], "port": port["port"], "netdev": netdev,
                        "link_layer": port["link_layer"]} for dev, port, netdev in usable],
        "errors": errors,
    }


def shell_quote(value):
    return "'" + str(value).replace("'", "'\"'\"'") + "'"


def render_env_file(result):
    """A file for ``source``: exports with their reasons as comments."""
    lines = ["# NCCL and launch environment, detected by mlinfra autodetect",
             "# transport: %s (%s)" % (result["transport"], result["transport_reason"])]
    for detail in result["details"]:
        error = override_error(detail["name"], detail["value"])
        if error:
            raise ValueError("not written to an env file: " + error)
        lines.append("# %s: %s" % (detail["name"], " ".join(str(detail["reason"]).split())))
        if detail["set"]:
            lines.append("export %s=%s" % (detail["name"], shell_quote(detail["value"])))
    lines.append("export DETECTED_TRANSPORT=%s" % shell_quote(result["transport"]))
    return "\n".join(lines) + "\n"


_ENV_LINE = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
# A value as shell_quote writes it ('...' and "'" pieces), or a plain word:
# nothing that a shell would expand.
_ENV_VALUE = re.compile(r"""^(?:'[^']*'|"'"|[\w./,:=+@%-])*$""")


def parse_env_file(text):
    """The variables of a file render_env_file wrote, {name: value} in file
    order, without running a shell: comments and blank lines are skipped,
    values are unquoted as sh would. Raises ValueError, naming the line, on
    anything else (the file is not one render_env_file wrote)."""
    env = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _ENV_LINE.match(stripped)
        try:
            words = shlex.split(match.group(2)) if match and _ENV_VALUE.match(match.group(2)) else None
        except ValueError:
            words = None
        if words is None or len(words) > 1:
            raise ValueError("line %d is not NAME=VALUE as render_env_file writes: %r" % (number, line[:80]))
        env[match.group(1)] = words[0] if words else ""
    return env


def read_env_file(path):
    """parse_env_file of a file (the nccl.env of mlinfra autodetect)."""
    with open(path) as handle:
        return parse_env_file(handle.read())


# What every pod of one job must share, and what it should: NCCL ranks on a
# transport or a number of rails of their own hang or crawl; a node without
# GPUDirect RDMA or with another NCCL only makes the whole job slower.
# (field, its words in messages, level, its value in one pod's result). On a
# tie the better value (rdma, more ports, GPUs or GPUDirect) is the expected
# one, so that the pods named are those that lack something.
AGREEMENT_FIELDS = (
    ("transport", "transport", "fail", lambda result: result["transport"]),
    ("rdma_ports", "usable RDMA ports", "fail",
     lambda result: len(result["rdma_ports"]) if result["transport"] == "rdma" else 0),
    ("gpus", "GPUs", "fail", lambda result: result.get("gpus")),
    ("gpudirect", "GPUDirect RDMA", "warn", lambda result: result.get("gpudirect")),
    ("nccl_version", "NCCL version", "warn", lambda result: result.get("nccl_version")),
)


def _preference(value):
    """Higher is better: rdma over tcp, a larger count or version, True over
    False, anything over unknown."""
    if value is None:
        return (0,)
    if value == "rdma":
        return (2,)
    if isinstance(value, str) and parse_version(value):
        return (1,) + tuple(parse_version(value))
    if isinstance(value, (bool, int)):
        return (1, int(value))
    return (1,)


def compare_pod_results(pods):
    """Compare the detection results of the pods of one job.

    ``pods`` is a list of {"pod", "node", "json"} (``json``, the parsed
    nccl.json of mlinfra autodetect or a result of compute_nccl_env; None when the
    pod's result could not be read). Returns {"agree", "mismatches",
    "unreadable"}: a mismatch names the field, its level (fail or warn), the
    value of the most pods, the odd pods with their nodes and values, and a
    one-line message.
    """
    unreadable = [p["pod"] for p in pods if not isinstance(p.get("json"), dict)]
    readable = [p for p in pods if isinstance(p.get("json"), dict)]
    mismatches = []
    for field, words, level, value_of in AGREEMENT_FIELDS:
        groups = {}
        for pod in readable:
            groups.setdefault(_hashable(value_of(pod["json"])), []).append(pod)
        if len(groups) < 2:
            continue
        # The value of the most pods is taken as the expected one (ties: the
        # better value); the others are the odd ones.
        ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), _negated(_preference(item[0]))))
        expected = ordered[0][0]
        odd = [{"pod": p["pod"], "node": p.get("node"), "value": value} for value, members in ordered[1:]
               for p in members]
        odd = sorted(odd, key=lambda entry: _ordinal(entry["pod"]))
        mismatches.append({"field": field, "level": level, "expected": expected, "odd": odd,
                           "message": "%s: %s on %d pod(s), but %s" % (
                               words, expected, len(readable) - len(odd),
                               "; ".join("%s on %s (node %s)" % (entry["value"], entry["pod"], entry["node"])
                                         for entry in odd))})
    agree = not unreadable and not any(m["level"] == "fail" for m in mismatches)
    return {"agree": agree, "mismatches": mismatches, "unreadable": unreadable}


def _hashable(value):
    """A hashable stand-in for a result value (None, numbers and strings as
    they are)."""
    return value if value is None or isinstance(value, (int, float, str, bool)) else str(value)


def _negated(preference):
    return tuple(-part for part in preference)


def _ordinal(pod_name):
    tail = pod_name.rsplit("-", 1)[-1]
    return (int(tail), pod_name) if tail.isdigit() else (1 << 30, pod_name)
