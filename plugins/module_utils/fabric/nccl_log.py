# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The transport NCCL really used, read from its NCCL_DEBUG=INFO lines.

NCCL falls back to TCP sockets without any error when it cannot open an RDMA
device, and stages every transfer through host memory when GPUDirect RDMA is
off; neither shows anywhere but in its own log. ``parse_nccl_log`` reads
that log (any number of ranks and hosts interleaved, launcher prefixes,
NCCL 2.18 to 2.28 wording) and ``check_nccl_transport`` judges it as one
check in the node_checks result format.

What decides, strongest first:

- connection lines, ``Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA``:
  what each connection really went over, and whether the NIC reads and
  writes GPU memory directly (``/GDRDMA``). They are logged under
  NCCL_DEBUG_SUBSYS=INIT, which is on by default;
- ``Using network IB`` and (2.26 and later) ``Assigned NET plugin IB to comm``:
  the network each communicator selected;
- the device lists ``NET/IB : Using [0]mlx5_0:1/RoCE ...`` /
  ``NET/Socket : Using [0]eth0:...``, ``Initialized NET plugin IB``, and the
  net plugin NCCL loaded.

``GPU Direct RDMA Enabled|Disabled for HCA`` lines are logged only with
NCCL_DEBUG_SUBSYS=NET (or ALL), so they support the connection lines but
do not replace them: GPUDirect RDMA counts as used only when a network
connection was made.

Standard library only and importable without torch: shared by the command
``mlinfra nccl-log``, which runs in pods and on laptops, and the Ansible
side.
"""

from __future__ import absolute_import, division, print_function

import argparse
import gzip
import json
import re
import sys

from ..common.status import FAIL, PASS, SKIP, WARN, check_result
from ..node.checks import MODES
from ..common.errors import MlinfraError

__metaclass__ = type

TOOL = "mlinfra nccl-log"
CHECK_NAME = "nccl_transport"
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

# A log of N ranks repeats each line N times: keep the first few distinct
# lines of each kind, enough to quote, not a copy of the log.
MAX_QUOTED = 3
MAX_CLUES = 6
MAX_WARNINGS = 10

# Network names (NCCL's ncclNet->name) by what they run on. IB is NCCL's own
# verbs transport (InfiniBand and RoCE); IBext the same from NVIDIA's
# nccl-rdma-sharp-plugins (HPC-X, NGC images); gIB Google's verbs plugin;
# Libfabric / AWS Libfabric the aws-ofi-nccl plugin (EFA). Socket is TCP.
RDMA_NET_PATTERN = re.compile(r"^(?:IB|IBext|gIB|(?:AWS )?Libfabric|OFI)(?:[-_ ].*)?$", re.IGNORECASE)
SOCKET_NET = "Socket"

# Where the decided network came from, strongest first.
SOURCE_CHANNELS = "connections"
SOURCE_SELECTED = "selection"
SOURCE_DEVICES = "device list"
SOURCE_PLUGIN = "net plugin"
SOURCES = (SOURCE_CHANNELS, SOURCE_SELECTED, SOURCE_DEVICES, SOURCE_PLUGIN)

# A line of NCCL's logger: "NCCL INFO", "NCCL WARN" (TRACE in debug builds).
# Before it: host:pid:tid [cudaDev], for WARN also the source location, and
# possibly a launcher's prefix ("[rank0]:", "[1,0]<stdout>:", a timestamp).
_LEVEL = re.compile(r"\bNCCL (INFO|WARN|TRACE)\b ?")
_PREFIX = re.compile(r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:\S+:\d+ )?$")
# Printed bare ("NCCL version 2.21.5+cuda12.4") by 2.2x releases, as an INFO
# message by recent ones (2.27 on), and alone with NCCL_DEBUG=VERSION.
_VERSION = re.compile(r"\bNCCL version (?P<version>\d+\.\d+\.\d+)(?:[-+]cuda(?P<cuda>\d+(?:\.\d+)*))?")

_USING_NETWORK = re.compile(r"^Using network (?P<net>\S.*?)\s*$")
_ASSIGNED = re.compile(r"^Assigned NET plugin (?P<net>\S.*?) to comm\b")
_INITIALIZED = re.compile(r"^Initialized NET plugin (?P<net>\S.*?)\s*$")
# HPC-X's plugin says which of its networks it will serve: "P2P plugin IBext".
_P2P_PLUGIN = re.compile(r"^P2P plugin (?P<net>\S+)")
_NET_USING = re.compile(r"^NET/(?P<net>[^:/]+?) ?: ?Using\b(?P<rest>.*)$")
_PLUGIN_LOADED = re.compile(r"^NET/Plugin ?: ?Loaded net plugin (?P<net>.+?) \(v\d+\)")
_HCA = re.compile(r"\[(?P<index>\d+)\](?P<device>[^\s:\[\]]+):(?P<port>\d+)(?::[^/\s]*)?/(?P<link>[A-Za-z]+)"
                  r"(?P<flags>(?:/[A-Za-z]+)*)")
_IFACE = re.compile(r"\[(?P<index>\d+)\](?P<iface>[^\s:\[\]]+):(?P<address>[^\s<]+)<\d+>")
_OOB = re.compile(r"\bOOB (?P<oob>\S+)")

# "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA"; without the
# connection index in SHM lines and in old releases, "Ring 00 : ..." in 2.5
# and before, and CollNet's own form.
_CHANNEL = re.compile(r"^(?:Channel|Ring|CollNet) \d+(?:/\d+)? : \d+(?:\[[^\]]*\])?(?: -> \d+(?:\[[^\]]*\])?)?"
                      r"(?: \[(?P<direction>send|receive)\])? via (?P<via>\S.*?)\s*$")
# NET/<name>/<dev>[(<proxy rank>)][/GDRDMA][(PCI)][/Shared]; names may hold
# spaces ("AWS Libfabric").
_NET_VIA = re.compile(r"^(?P<family>NET|COLLNET)/(?P<net>[^/]+)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?(?P<flags>.*)$",
                      re.IGNORECASE)

_GDR_HCA = re.compile(r"GPU Direct RDMA (?P<state>Enabled|Disabled) for HCA (?P<index>\d+) '(?P<device>[^']*)'")
# graph/paths.cc: the GPU-NIC pair check (distance against NCCL_NET_GDR_LEVEL).
_GDR_PAIR = re.compile(r"GPU Direct RDMA (?P<state>Enabled|Disabled) for GPU (?P<gpu>[^\s/]+) / HCA (?P<hca>[^\s(]+)")
_DMABUF = re.compile(r"^DMA-BUF is available on GPU device (?P<gpu>\d+)")
_RINGS_GDR = re.compile(r"^Connected all rings\b.*\bGDR (?P<gdr>[01])\b")
# "comm 0x... rank 0 nRanks 16 nNodes 2 localRanks 8 ..." (init.cc) and
# "ncclCommInitRank(Config) comm 0x... rank 7 nranks 8 cudaDev 3 ...".
_COMM = re.compile(r"\bcomm (?:0x)?[0-9a-f]+ rank (?P<rank>\d+) nranks (?P<nranks>\d+)(?: nnodes (?P<nodes>\d+))?",
                   re.IGNORECASE)
_ENV = re.compile(r"^(?P<name>NCCL_[A-Z0-9_]+) set (?:by environment )?to (?P<value>.*?)\.?\s*$")

# WARN lines that mean a communicator or a connection failed, not a fallback
# NCCL recovers from (a missing libibverbs, libcuda's path): connections that
# could not be made, work requests the NIC completed with an error, verbs
# calls that set up a connection, CUDA failing under NCCL. A connection that
# a peer closed ("socketProgress: Connection closed by remote peer") is
# also what ranks log when the first of them exits at the end of a good run;
# it counts only with the error return below.
_FATAL_WARNINGS = (
    re.compile(r"Failed to execute operation Connect"),
    re.compile(r"Error encountered progressing operation"),
    re.compile(r"socket\w*: Connect to \S+ failed"),
    re.compile(r"Got completion (?:from peer \S+ )?with error"),
    re.compile(r"Call to ibv_(?:create_qp|create_cq|modify_qp|reg_mr|reg_dmabuf_mr|post_send|post_recv) failed"),
    re.compile(r"Cuda failure"),
    re.compile(r"\b[Aa]bort(?:ed|ing)?\b"),
)
# An error return passed up NCCL's calls ("transport/net_ib.cu:407 -> 2",
# "init.cc:1089 -> 3"). After a WARN, one that reaches the communicator's
# set-up, its proxy or a transport means the WARN was fatal; the plugin
# loader's ("include/net.h:24 -> 2", "net.cc:79 -> 3" when no external
# plugin is found) are not.
_ERROR_RETURN = re.compile(r"^(?P<file>\S+\.(?:cc|cu|c|h)):\d+ -> (?P<code>[1-9]\d*)$")
_FATAL_RETURN_FILES = re.compile(r"(?:^|/)(?:init|bootstrap|proxy|transport|group|enqueue)\.(?:cc|cu)$|(?:^|/)transport/")

# Lines that say why NCCL fell back to sockets; quoted to the operator.
_CLUES = (
    re.compile(r"NET/IB ?: ?No device found"),
    re.compile(r"NCCL_IB_DISABLE set by environment to [1-9]"),
    re.compile(r"NCCL_NET set by environment to"),
    re.compile(r"NCCL_IB_HCA set (?:by environment )?to"),
    re.compile(r"Failed to open libibverbs"),
    re.compile(r"NET/IB ?: ?(?:Unable to open device|No IP interface found)"),
    re.compile(r"Call to ibv_\w+ failed"),
)

# What a single-node run connects over: no network at all.
LOCAL_FAMILIES = ("P2P", "SHM")
FAMILIES = ("NET", "COLLNET", "P2P", "SHM", "other")

SOCKET_FIX = (
    "NCCL falls back to TCP sockets when it cannot open an RDMA device. Usual causes, in the training pod: "
    "NCCL_IB_HCA names devices the pod does not have (compare it with ls /sys/class/infiniband in the pod; "
    "'mlx5' matches every mlx5_N, '=mlx5_0' only that one); /dev/infiniband is missing or the IPC_LOCK "
    "capability is not granted (mlinfra node-check --in-pod checks both; cluster_security_mode: ipc_lock or "
    "privileged); NCCL_IB_DISABLE=1 or NCCL_NET=Socket is set (remove them); the pod does not request the RDMA "
    "device plugin's resource (cluster_rdma_nics), so no RDMA device is mounted into it; the image lacks "
    "libibverbs (rdma-core). Fix the cause and run the NCCL test again.")
GPUDIRECT_FIX = (
    "NCCL stages every network transfer through host memory. Give the NIC direct access to GPU memory: load "
    "nvidia_peermem on the nodes (GPU operator: driver.rdma.enabled=true in the ClusterPolicy), or use DMA-BUF: "
    "NCCL_DMABUF_ENABLE=1 (the default in recent NCCL) with a kernel >= 5.12 and NVIDIA's open GPU kernel "
    "modules (driver.useOpenKernelModules=true). Check also that NCCL_NET_GDR_LEVEL is not set lower than the "
    "GPU-NIC distance, and that PCIe ACS does not redirect peer-to-peer traffic (mlinfra node-check).")


ERROR_FIX = (
    "A connection or the communicator failed; the quoted line names the call. Read the first error of every rank: "
    "the first to fail is the cause, the others lost their peer. Usual causes: a rank that exited or was killed "
    "first (its own log says why); a firewall, or NCCL_SOCKET_IFNAME naming an interface the hosts cannot reach "
    "each other on (socket connect and closed-connection errors); an RDMA path that drops work requests (completion "
    "errors 4 or 12: NCCL_IB_GID_INDEX, MTU, RoCE's lossless settings, a link going down: mlinfra node-check); "
    "too little locked memory for the queue pairs (ibv_create_qp, ibv_reg_mr: the IPC_LOCK capability, ulimit -l).")


class NcclLogError(MlinfraError):
    """A log that cannot be read; the message says which and why."""


class _Quotes:
    """The first few raw lines of one kind, one per distinct message, so a
    line repeated by every rank is quoted once."""

    def __init__(self, limit=MAX_QUOTED):
        self.limit = limit
        self.lines = []
        self.seen = set()

    def add(self, message, raw):
        """Keeps ``raw`` unless its message was kept or enough lines are."""
        if len(self.lines) < self.limit and message not in self.seen:
            self.seen.add(message)
            self.lines.append(raw)


def net_kind(name):
    """``rdma``, ``socket`` or ``other`` (a net plugin this module does not
    know, e.g. GPUDirect-TCPX); None for no network."""
    if not name:
        return None
    if name.lower() == SOCKET_NET.lower():
        return "socket"
    return "rdma" if RDMA_NET_PATTERN.match(name) else "other"


def _nccl_messages(line):
    """(level, message, host, pid) for each NCCL logger message in one
    physical line. Processes writing at once can glue two messages into one
    line; the text left of the second one's prefix belongs to the first."""
    tokens = list(_LEVEL.finditer(line))
    for position, token in enumerate(tokens):
        end = tokens[position + 1].start() if position + 1 < len(tokens) else len(line)
        message = line[token.end():end]
        if position + 1 < len(tokens):
            message = _PREFIX.sub("", message)
        prefix = _PREFIX.search(line, tokens[position - 1].end() if position else 0, token.start())
        if prefix is None:
            yield token.group(1), message.strip(), None, None
        else:
            yield token.group(1), message.strip(), prefix.group("host"), prefix.group("pid")


def _lines(source):
    """Lines of text, bytes (decoded, undecodable bytes replaced) or an
    iterable of lines."""
    if source is None:
        return []
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    if isinstance(source, str):
        return source.splitlines()
    return source


class _Tally:
    """How many lines of one source named each network, and the first of
    them (a log of thousands of connection lines is not kept)."""

    def __init__(self):
        self.names = {}

    def add(self, name, raw):
        """Counts one line naming network ``name``."""
        entry = self.names.setdefault(name, {"count": 0, "order": len(self.names), "first": raw})
        entry["count"] += 1

    def first(self, name):
        """The first raw line that named ``name``, or None."""
        return self.names[name]["first"] if name in self.names else None

    def decide(self, prefer_socket):
        """The network these lines name. A fallback on any rank is what
        matters, so Socket wins among connections and selections; among
        device lists the other network wins, because NCCL before 2.6 listed
        the socket devices even when it then used IB."""
        if not self.names:
            return None
        if SOCKET_NET in self.names and (prefer_socket or len(self.names) == 1):
            return SOCKET_NET
        others = [name for name in self.names if name != SOCKET_NET]
        # The most frequent; on a tie the first one logged.
        return max(others, key=lambda name: (self.names[name]["count"], -self.names[name]["order"]))


class _LogReader:
    """Collects what parse_nccl_log reports, one physical line at a time."""

    def __init__(self):
        self.nccl_lines = 0
        self.info_lines = 0
        self.versions = []
        self.hosts = set()
        self.processes = set()
        self.comm = {"nranks": None, "nodes": None}
        # The networks each source of lines named.
        self.candidates = dict((source, _Tally()) for source in SOURCES)
        kinds = ("gdr_channel", "plain_channel", "gdr_enabled", "gdr_disabled")
        self.quotes = dict((kind, _Quotes()) for kind in kinds)
        self.quotes["rings"] = _Quotes(1)
        self.hcas = {}
        self.interfaces = {}
        self.oob = set()
        self.gdr_hcas = {}
        self.gdr_pairs = {"Enabled": 0, "Disabled": 0}
        self.dmabuf = set()
        self.ring_gdr = set()
        self.channels = {}
        self.families = dict((family, 0) for family in FAMILIES)
        self.net_channels = 0
        self.gdr_channels = 0
        self.env = {}
        self.net = None
        self.net_source = None
        self.plugin = None
        self.clues = _Quotes(MAX_CLUES)
        self.warnings = _Quotes(MAX_WARNINGS)
        # Per (host, direction): network connection lines with and without
        # GDRDMA, and the first without.
        self.links = {}
        self.errors = _Quotes(MAX_QUOTED)
        # Per process, the WARNs since its last INFO line other than an
        # error return: those an error return that follows comes from.
        self.recent_warnings = {}

    def feed(self, raw):
        """Reads one physical line of the log."""
        raw = raw.rstrip("\r\n")
        version = _VERSION.search(raw)
        if version and (version.group("version"), version.group("cuda")) not in self.versions:
            self.versions.append((version.group("version"), version.group("cuda")))
        found = False
        for level, message, host, pid in _nccl_messages(raw):
            found = True
            if host:
                self.hosts.add(host)
                self.processes.add((host, pid))
            if level == "WARN":
                self.warnings.add(message, raw)
                self.recent_warnings.setdefault((host, pid), []).append((message, raw))
                if any(pattern.search(message) for pattern in _FATAL_WARNINGS):
                    self.errors.add(message, raw)
            elif level == "INFO":
                self.info_lines += 1
                if not _ERROR_RETURN.match(message):
                    self.recent_warnings.pop((host, pid), None)
            for clue in _CLUES:
                if clue.search(message):
                    self.clues.add(message, raw)
                    break
            self._message(message, raw, host, pid)
        if found or version:
            self.nccl_lines += 1

    def _message(self, message, raw, host, pid):
        """Files one NCCL message; each message is of one kind at most."""
        match = _CHANNEL.match(message)
        if match:
            self._channel(match.group("via"), raw, host, match.group("direction"))
            return
        match = _ERROR_RETURN.match(message)
        if match:
            if _FATAL_RETURN_FILES.search(match.group("file")):
                for warning in self.recent_warnings.pop((host, pid), []):
                    self.errors.add(*warning)
            return
        for pattern, source in ((_USING_NETWORK, SOURCE_SELECTED), (_ASSIGNED, SOURCE_SELECTED),
                                (_INITIALIZED, SOURCE_DEVICES), (_NET_USING, SOURCE_DEVICES),
                                (_P2P_PLUGIN, SOURCE_PLUGIN), (_PLUGIN_LOADED, SOURCE_PLUGIN)):
            match = pattern.match(message)
            # "NET/Plugin: Using internal network plugin." names no network.
            if match and match.group("net") != "Plugin":
                self.candidates[source].add(match.group("net"), raw)
                if pattern is _PLUGIN_LOADED and self.plugin is None:
                    self.plugin = match.group("net")
                if pattern is _NET_USING:
                    self._devices(match.group("net"), match.group("rest"), host)
                return
        match = _GDR_HCA.search(message) or _GDR_PAIR.search(message)
        if match:
            enabled = match.group("state") == "Enabled"
            self.quotes["gdr_enabled" if enabled else "gdr_disabled"].add(message, raw)
            if match.re is _GDR_HCA:
                # Disabled on any host is what needs fixing.
                self.gdr_hcas[match.group("device")] = self.gdr_hcas.get(match.group("device"), True) and enabled
            else:
                self.gdr_pairs[match.group("state")] += 1
            return
        match = _DMABUF.match(message)
        if match:
            self.dmabuf.add((host, match.group("gpu")))
            return
        match = _RINGS_GDR.match(message)
        if match:
            self.ring_gdr.add(int(match.group("gdr")))
            self.quotes["rings"].add(message, raw)
            return
        match = _COMM.search(message)
        if match:
            for key in ("nranks", "nodes"):
                if match.group(key) is not None:
                    self.comm[key] = max(self.comm[key] or 0, int(match.group(key)))
            return
        match = _ENV.match(message)
        if match:
            self.env[match.group("name")] = match.group("value")

    def _channel(self, via, raw, host, direction):
        net = _NET_VIA.match(via)
        if net:
            family = net.group("family").upper()
            gdr = "/GDRDMA" in net.group("flags").upper()
            key = "%s/%s%s" % (family, net.group("net"), "/GDRDMA" if gdr else "")
            self.net_channels += 1
            self.gdr_channels += 1 if gdr else 0
            # Old releases name no direction: such a line stands for both.
            link = self.links.setdefault((host or "", direction or "send and receive"),
                                         {"gdr": 0, "plain": 0, "plain_line": None})
            link["gdr" if gdr else "plain"] += 1
            if not gdr and link["plain_line"] is None:
                link["plain_line"] = raw
            self.candidates[SOURCE_CHANNELS].add(net.group("net"), raw)
            # One quote per network and kind, not per channel number.
            self.quotes["gdr_channel" if gdr else "plain_channel"].add(key, raw)
        else:
            key = via
            family = via.split("/", 1)[0].upper()
            family = family if family in FAMILIES else "other"
        self.families[family] += 1
        self.channels[key] = self.channels.get(key, 0) + 1

    def _devices(self, net, rest, host):
        """The devices listed by ``NET/<net> : Using ...``."""
        if net == SOCKET_NET:
            for match in _IFACE.finditer(rest):
                entry = self.interfaces.setdefault((match.group("iface"), match.group("address")), {
                    "index": int(match.group("index")), "interface": match.group("iface"),
                    "address": match.group("address"), "hosts": set()})
                if host:
                    entry["hosts"].add(host)
            return
        for match in _HCA.finditer(rest):
            key = (match.group("device"), int(match.group("port")), match.group("link"))
            entry = self.hcas.setdefault(key, {
                "index": int(match.group("index")), "device": match.group("device"),
                "port": int(match.group("port")), "link_layer": match.group("link"),
                "flags": [flag for flag in match.group("flags").split("/") if flag], "net": net, "hosts": set()})
            if host:
                entry["hosts"].add(host)
        match = _OOB.search(rest)
        if match:
            self.oob.add(match.group("oob"))

    def _repair_hosts(self):
        """A message cut short by another process's line glues its tail to
        that line's host name ("...comm 0x55dgpu-a02:3901:3977 [0] NCCL
        INFO"): such a name ends with a host seen on clean lines."""
        glued = dict((host, known) for host in self.hosts for known in self.hosts
                     if host != known and host.endswith(known))
        if glued:
            self.hosts = set(glued.get(host, host) for host in self.hosts)
            self.processes = set((glued.get(host, host), pid) for host, pid in self.processes)

    def result(self):
        """What the lines read so far say; see parse_nccl_log."""
        self._repair_hosts()
        hcas = [dict(self.hcas[key], hosts=sorted(self.hcas[key]["hosts"])) for key in sorted(self.hcas)]
        interfaces = [dict(self.interfaces[key], hosts=sorted(self.interfaces[key]["hosts"]))
                      for key in sorted(self.interfaces)]
        net_evidence = self._decide_net()
        result = {
            "nccl_lines": self.nccl_lines,
            "info_lines": self.info_lines,
            "nccl_version": self.versions[0][0] if self.versions else None,
            "cuda_version": self.versions[0][1] if self.versions else None,
            "nccl_versions": sorted(set(version for version, cuda in self.versions)),
            "hosts": sorted(self.hosts),
            "processes": len(self.processes),
            "nranks": self.comm["nranks"],
            "nodes": self.comm["nodes"],
            "plugin": self.plugin,
            "hcas": hcas,
            "link_layers": sorted(set(hca["link_layer"] for hca in hcas)),
            "socket_interfaces": interfaces,
            "oob": sorted(self.oob),
            "dmabuf": True if self.dmabuf else None,
            "channels": self.channels,
            "channel_families": self.families,
            "net_channels": self.net_channels,
            "gdr_channels": self.gdr_channels,
            "ring_gdr": sorted(self.ring_gdr),
            "env": self.env,
            "clues": self.clues.lines,
            "warnings": self.warnings.lines,
            "errors": self.errors.lines,
            # Where GDRDMA was used on some network connections but a host
            # received without it on every one of its own. Sends are not
            # counted: they go without it whenever GPUDirect reads are off
            # (NCCL_NET_GDR_READ), on every host alike.
            "links_without_gdr": [
                {"host": host, "direction": direction, "line": link["plain_line"]}
                for (host, direction), link in sorted(self.links.items())
                if self.gdr_channels and link["plain"] and not link["gdr"] and direction != "send"],
            "net": self.net,
            "net_source": self.net_source,
            "net_kind": net_kind(self.net),
            "nets": sorted(set(name for source in (SOURCE_CHANNELS, SOURCE_SELECTED)
                               for name in self.candidates[source].names)),
            "evidence": {"net": net_evidence, "gpudirect": []},
        }
        self._decide_gpudirect(result)
        result["notes"] = _notes(result)
        return result

    def _decide_net(self):
        """Sets net and net_source; returns the lines that decided them."""
        self.net, self.net_source = None, None
        for source in SOURCES:
            self.net = self.candidates[source].decide(prefer_socket=source in (SOURCE_CHANNELS, SOURCE_SELECTED))
            if self.net:
                self.net_source = source
                break
        if not self.net:
            return []
        # The deciding line first, then the selection and the device list
        # that back it (for Socket: the interfaces it fell back to).
        evidence = [self.candidates[self.net_source].first(self.net)]
        for source in (SOURCE_SELECTED, SOURCE_DEVICES):
            raw = self.candidates[source].first(self.net)
            if raw and raw not in evidence:
                evidence.append(raw)
        return evidence[:MAX_QUOTED]

    def _decide_gpudirect(self, result):
        """gpudirect from the network connections; gpudirect_capable and
        gpudirect_hcas from the HCA lines, which only support it."""
        result["gpudirect_hcas"] = self.gdr_hcas
        if self.gdr_hcas or self.gdr_pairs["Enabled"] or self.gdr_pairs["Disabled"]:
            result["gpudirect_capable"] = any(self.gdr_hcas.values()) or self.gdr_pairs["Enabled"] > 0
        else:
            result["gpudirect_capable"] = None
        evidence = result["evidence"]["gpudirect"]
        if not self.net_channels:
            result["gpudirect"] = None
            evidence.extend(self.quotes["gdr_disabled"].lines[:1] + self.quotes["gdr_enabled"].lines[:1])
            return
        result["gpudirect"] = self.gdr_channels > 0
        if result["gpudirect"]:
            evidence.extend(self.quotes["gdr_channel"].lines[:1] + self.quotes["gdr_enabled"].lines[:1])
        else:
            evidence.extend(self.quotes["plain_channel"].lines[:1] + self.quotes["gdr_disabled"].lines[:1])
        evidence.extend(self.quotes["rings"].lines)
        del evidence[MAX_QUOTED:]


def parse_nccl_log(source):
    """Read NCCL's log lines from text, bytes or an iterable of lines (a
    file, the lines of several files in turn).

    Returns a dict: ``nccl_lines`` (lines from NCCL's logger; 0 for an empty
    log or one without NCCL lines, which ``notes`` then says), ``info_lines``,
    ``nccl_version``/``cuda_version`` (the first logged), ``nccl_versions``,
    ``hosts``, ``processes``, ``nranks``, ``nodes`` (largest communicator),
    ``net`` (the network NCCL used: IB, Socket or a plugin's name; None when
    the log does not say), ``net_kind`` (rdma, socket, other), ``net_source``
    (connections, selection, device list, net plugin), ``nets`` (every
    network a rank selected or connected over), ``plugin`` (external net
    plugin loaded), ``hcas`` ({index, device, port, link_layer, flags, net,
    hosts}), ``link_layers``, ``socket_interfaces``, ``oob``, ``gpudirect``
    (True/False from the network connections, None without any),
    ``gpudirect_capable`` and ``gpudirect_hcas`` (from the HCA lines),
    ``dmabuf``, ``channels`` (connection lines per kind: ``NET/IB/GDRDMA``,
    ``NET/Socket``, ``P2P/CUMEM/read``, ``SHM/direct/direct``...),
    ``channel_families`` (NET, COLLNET, P2P, SHM, other), ``net_channels``,
    ``gdr_channels``, ``ring_gdr``, ``env`` (NCCL variables NCCL reported),
    ``clues`` (lines saying why NCCL fell back), ``warnings`` (WARN lines),
    ``evidence`` ({net, gpudirect}: the raw lines that decided them) and
    ``notes``.
    """
    reader = _LogReader()
    for raw in _lines(source):
        reader.feed(raw)
    return reader.result()


def _notes(result):
    notes = []
    if not result["nccl_lines"]:
        notes.append("no NCCL lines in the log: was NCCL_DEBUG=INFO set in the job's environment, and did the job "
                     "reach NCCL's initialization?")
    elif not result["info_lines"]:
        notes.append("NCCL lines but no NCCL INFO lines: NCCL_DEBUG is set below INFO (WARN or VERSION)")
    if len(result["nccl_versions"]) > 1:
        notes.append("ranks ran different NCCL versions: %s" % ", ".join(result["nccl_versions"]))
    if len(result["nets"]) > 1:
        notes.append("ranks did not all use the same network: %s" % ", ".join(result["nets"]))
    if result["net_channels"] and result["net_channels"] > result["gdr_channels"] > 0:
        notes.append("GPUDirect RDMA on %d of %d network connection lines (sends without it are normal when "
                     "GPUDirect reads are off, NCCL_NET_GDR_READ)" % (result["gdr_channels"], result["net_channels"]))
    return notes


def _quote(lines, count=2):
    """Lines as they are in the log, in double quotes: NCCL puts single
    quotes around device names."""
    unique = []
    for line in lines:
        if line.strip() not in unique:
            unique.append(line.strip())
    return "; ".join('"%s"' % line for line in unique[:count])


def _count(items, noun, plural=None):
    return "%d %s" % (items, noun if items == 1 else plural or noun + "s")


def _result(status, message, remediation=None, data=None):
    return check_result(CHECK_NAME, status, message, remediation, data)


def check_data(parsed):
    """The part of a parsed log a check result carries."""
    keys = ("nccl_version", "net", "net_kind", "net_source", "nets", "gpudirect", "gpudirect_capable", "channels",
            "channel_families", "net_channels", "gdr_channels", "hcas", "nodes", "nranks", "hosts", "evidence",
            "clues", "errors", "links_without_gdr", "notes")
    return dict((key, parsed.get(key)) for key in keys)


def check_nccl_transport(parsed, mode, require_gpudirect=True):
    """Judge a parsed log (parse_nccl_log) for ``mode`` rdma or tcp.

    Both modes: fail when NCCL reported a failure (a connection that could
    not be made, a work request completed with an error, a verbs or CUDA
    call that failed, a WARN whose error return reached the communicator's
    set-up), quoting the first such lines.
    rdma: fail when NCCL used sockets (or selected them, even where no
    network connection was made: across nodes it would use them), on
    network connections without GPUDirect RDMA, and when a host received
    without it while others used it (each a warning when
    ``require_gpudirect`` is false); pass on RDMA with it.
    tcp: pass on any network, saying which. In both modes a run whose ranks
    made no network connection (one node: only P2P/SHM) is skipped, never
    passed: the network was not used, so it could not be judged. A log
    without NCCL lines is skipped too.
    """
    if mode not in MODES:
        raise ValueError("mode must be one of %s, got %r" % (", ".join(MODES), mode))
    data = check_data(parsed)
    if not parsed["nccl_lines"]:
        return _result(SKIP, "not checked: %s" % parsed["notes"][0], data=data)
    # A failure is one whatever else the log holds, even at NCCL_DEBUG=WARN.
    if parsed["errors"]:
        used = " (network: %s)" % _describe_net(parsed) if parsed["net"] else ""
        return _result(FAIL, "NCCL reported a failure%s: %s" % (used, _quote(parsed["errors"], MAX_QUOTED)),
                       ERROR_FIX, data)
    if not parsed["info_lines"]:
        return _result(SKIP, "not checked: NCCL logged no INFO lines; set NCCL_DEBUG=INFO", data=data)
    net, kind = parsed["net"], parsed["net_kind"]
    quoted_net = _quote(parsed["evidence"]["net"])
    if kind == "socket" and mode == "rdma":
        message = "NCCL used TCP sockets, not RDMA: %s" % quoted_net
        if not parsed["net_channels"]:
            message += " (no network connection was made, but this is the network NCCL would use across nodes)"
        if len(parsed["nets"]) > 1:
            message += "; ranks disagreed: %s" % ", ".join(parsed["nets"])
        if parsed["clues"]:
            message += ". NCCL logged: %s" % _quote(parsed["clues"], MAX_CLUES)
        return _result(FAIL, message, SOCKET_FIX, data)
    if not parsed["net_channels"]:
        return _result(SKIP, _no_network_message(parsed), data=data)
    if mode == "tcp":
        return _result(PASS, "NCCL used %s%s: %s" % (_describe_net(parsed), _describe_gdr(parsed), quoted_net),
                       data=data)
    if not parsed["gpudirect"]:
        quoted_gdr = _quote(parsed["evidence"]["gpudirect"])
        message = "NCCL used %s without GPUDirect RDMA (%s, none via GDRDMA): %s" % (
            _describe_net(parsed), _count(parsed["net_channels"], "network connection line"), quoted_gdr)
        if parsed["gpudirect_capable"] is False:
            message += "; the HCA lines say GPUDirect RDMA is disabled"
        if kind == "other":
            message += "; %s is a net plugin this check does not know as RDMA" % net
        return _result(FAIL if require_gpudirect and kind == "rdma" else WARN, message, GPUDIRECT_FIX, data)
    if parsed["links_without_gdr"]:
        lacking = parsed["links_without_gdr"]
        message = "NCCL used %s with GPUDirect RDMA, but not everywhere: %s without it: %s" % (
            _describe_net(parsed),
            ", ".join("%s (%s)" % (link["host"] or "a host the log does not name", link["direction"])
                      for link in lacking),
            _quote([link["line"] for link in lacking]))
        return _result(FAIL if require_gpudirect and kind == "rdma" else WARN, message, GPUDIRECT_FIX, data)
    message = "NCCL used %s with GPUDirect RDMA: %s" % (
        _describe_net(parsed), _quote(parsed["evidence"]["net"][:2] + parsed["evidence"]["gpudirect"], MAX_QUOTED))
    if parsed["net_channels"] > parsed["gdr_channels"]:
        message += " (GDRDMA on %d of %d network connection lines)" % (
            parsed["gdr_channels"], parsed["net_channels"])
    if kind == "other":
        return _result(WARN, message + "; %s is a net plugin this check does not know as RDMA" % net,
                       "Confirm that the plugin is the RDMA transport this cluster should use.", data)
    return _result(PASS, message, data=data)


def _describe_net(parsed):
    """'IB (RDMA over RoCE)', 'TCP sockets (Socket)', 'the X net plugin'."""
    net, kind = parsed["net"], parsed["net_kind"]
    if kind == "rdma":
        layers = " and ".join("InfiniBand" if layer == "IB" else layer for layer in parsed["link_layers"])
        return "%s (RDMA%s)" % (net, " over " + layers if layers else "")
    if kind == "socket":
        return "TCP sockets (%s)" % net
    return "the %s net plugin" % net


def _describe_gdr(parsed):
    if parsed["gpudirect"] is None or parsed["net_kind"] == "socket":
        return ""
    return " with GPUDirect RDMA" if parsed["gpudirect"] else " without GPUDirect RDMA"


def _no_network_message(parsed):
    """Why a log with NCCL lines but no network connection is not judged."""
    families = parsed["channel_families"]
    local = sum(families[family] for family in LOCAL_FAMILIES)
    selected = ""
    if parsed["net"]:
        selected = "; NCCL selected %s at initialization: %s" % (parsed["net"], _quote(parsed["evidence"]["net"], 1))
    if parsed["nodes"] == 1 or (parsed["nodes"] is None and local):
        ranks = " %d" % parsed["nranks"] if parsed["nranks"] else ""
        return ("not checked: all%s ranks were on one node (%s, %s, no network connection): no network was used, "
                "so the network transport could not be judged; run the test across two nodes%s" % (
                    ranks, "nNodes 1" if parsed["nodes"] == 1 else "only P2P/SHM connections",
                    ", ".join("%s x%d" % item for item in sorted(parsed["channels"].items())) or "no connection lines",
                    selected))
    if parsed["nodes"]:
        return ("not checked: nNodes %d but no network connection lines (the job ended before connecting, the "
                "nodes are joined by multi-node NVLink, or NCCL_DEBUG_SUBSYS hides INIT)%s" % (
                    parsed["nodes"], selected))
    return "not checked: no connection (Channel ... via) lines in the log%s" % selected


def read_logs(paths, stdin=None):
    """The lines of the given files in turn ('-' is standard input, as is
    no file at all); .gz files are decompressed."""
    for path in paths or ["-"]:
        if path == "-":
            yield from stdin if stdin is not None else sys.stdin
            continue
        try:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as handle:
                for line in handle:
                    yield line.decode("utf-8", "replace")
        except (IOError, OSError) as exc:
            raise NcclLogError("cannot read %s: %s" % (path, exc)) from exc


def format_verdict(check, parsed):
    """A few lines for a person: the verdict, what the log showed, the fix."""
    lines = ["%s  %s: %s" % (check["status"].upper(), check["name"], check["message"])]
    if parsed["nccl_lines"]:
        channels = ", ".join("%s x%d" % item for item in sorted(parsed["channels"].items(), key=lambda x: -x[1]))
        gdr = {True: "yes", False: "no", None: "not used"}[parsed["gpudirect"]]
        lines.append("      log: NCCL %s, %s, %s, network %s%s, GPUDirect RDMA %s, connections: %s" % (
            parsed["nccl_version"] or "version unknown", _count(len(parsed["hosts"]), "host"),
            _count(parsed["processes"], "process", "processes"), parsed["net"] or "unknown",
            " (from %s)" % parsed["net_source"] if parsed["net_source"] else "", gdr, channels or "none logged"))
        if parsed["hcas"]:
            lines.append("      devices: %s" % ", ".join("%s:%d/%s" % (hca["device"], hca["port"], hca["link_layer"])
                                                         for hca in parsed["hcas"]))
    if check["status"] in (FAIL, WARN) and check["remediation"]:
        lines.append("      fix: %s" % check["remediation"])
    lines.extend("      note: %s" % note for note in parsed["notes"] if note not in check["message"])
    return "\n".join(lines)


def main(argv=None, stdin=None, stdout=None):
    """The command mlinfra nccl-log; returns its exit status."""
    stdout = stdout or sys.stdout
    parser = argparse.ArgumentParser(
        prog=TOOL,
        description="Which transport NCCL really used, from its NCCL_DEBUG=INFO log lines (one or more ranks). "
                    "Exit status 0 on pass, warn or skip (not judged), 1 on fail, 2 on bad input.")
    parser.add_argument("logs", nargs="*", metavar="LOG",
                        help="log files, read in turn (.gz allowed); '-' or none: standard input")
    parser.add_argument("--mode", choices=MODES, default="rdma",
                        help="rdma: sockets or no GPUDirect RDMA fail; tcp: any network passes (default %(default)s)")
    parser.add_argument("--no-require-gpudirect", dest="require_gpudirect", action="store_false",
                        help="in rdma mode, network connections without GPUDirect RDMA warn instead of failing")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        parsed = parse_nccl_log(read_logs(args.logs, stdin))
    except NcclLogError as exc:
        sys.stderr.write("%s: %s\n" % (TOOL, exc))
        return EXIT_USAGE
    check = check_nccl_transport(parsed, args.mode, require_gpudirect=args.require_gpudirect)
    if args.format == "json":
        json.dump({"check": check, "log": parsed}, stdout, indent=2, sort_keys=True)
        stdout.write("\n")
    else:
        stdout.write(format_verdict(check, parsed) + "\n")
    return EXIT_FAILED if check["status"] == FAIL else EXIT_OK
