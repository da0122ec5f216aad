# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""What separates the degraded runs of a soak from its normal ones.

throughput judges each run normal or degraded; this module takes what was
recorded beside each run (its facts: the pods by uid, their nodes, their
CPU placement against their GPUs' NUMA nodes, their GPU-to-NIC rails and
what every RDMA port's counters moved during the run, in the pods and, as
the probes read them, in the nodes' whole ports) and ranks the
factors by how well they separate the two groups: a node, a pair of nodes,
a NIC whose counter moved, a placement, a pod. A factor found in every
degraded run and in no normal one is the first suspect; when none is found
in most degraded runs more often than in the normal ones, the report says
plainly that nothing measured separates them.

A run's facts file sits beside its log, named like it with ``.facts.json``
for its extension (``run-03.json`` -> ``run-03.facts.json``), so that a
directory of runs from any cluster can be attributed (FACTS_FORMAT).

Standard library only: shared by the throughput_report module, the soak
role and the command ``mlinfra throughput-report``.
"""

from __future__ import absolute_import, division, print_function

import json
import os

from ..common.stats import median
from ..node.facts import natural_key
from ..node.rails import NEAR
from ..fabric.port_counters import meaning
from ..common.errors import MlinfraError

__metaclass__ = type

FACTS_SUFFIX = ".facts.json"
# What a facts file holds, as the errors say it.
FACTS_FORMAT = ('a JSON object {"run": N, "pods": [...]}, each pod with its "node" and, where known, "pod", "uid", '
                '"placement", "rails" and "port_counters", and optionally "nodes": [...], each with its "node" and '
                '"port_counters" (ansible-doc -t filter mlinfra.multinode.soak_run_facts)')
# How a node's whole port, read by its probe, is named beside the pods' ports.
WHOLE_PORT = " (whole port)"

# A factor counts when it is in more than this share of the degraded runs
# (one pod of one of two degraded runs is no cause of both) and its share
# there exceeds its share of the normal runs by at least this much: one in
# every degraded run and no normal one scores 1.
MIN_COVERAGE = 0.5
MIN_SEPARATION = 0.5
# One degraded run is no pattern: with fresh pods every run, its pods (and
# their nodes, when they move) are found in it alone by construction. Only
# a counter that moved in it, direct evidence, is named from a single run.
MIN_DEGRADED_RUNS = 2
# A counter counts in a run when it moved there more than this many times
# its median per GB over the normal runs (an error counter's is 0 on a
# healthy fabric; congestion counters move in every RoCE run).
COUNTER_EXCESS = 2.0
# Ties go to the factor that names most: a NIC's counter (the one that
# moved most first) before a placement, a rail, a node, a node pair and a
# single pod; a pair or a pod found in exactly the runs one of its nodes is
# found in is that node's evidence, not a factor of its own.
KIND_ORDER = ("counter", "placement", "rail", "node", "node_pair", "pod")

# How many of the normal runs' standard deviations the degraded runs'
# shortfall must clear before anything is named (throughput.noise decides;
# the summary says it).
NOISE_SIGMAS = 3

NOTHING = "nothing separates"
CANNOT_TELL = "cannot tell"
ATTRIBUTED = "attributed"
NO_DEGRADED = "no run degraded"
ALL_DEGRADED = "every run degraded"
NO_FACTS = "no facts"


class FactsError(MlinfraError, ValueError):
    """A facts file that is not what FACTS_FORMAT describes."""


def facts_path(log_path):
    """Where a run's facts sit: beside its log, the log's extension (and a
    .gz) replaced by .facts.json."""
    base = log_path[:-3] if log_path.endswith(".gz") else log_path
    stem, _extension = os.path.splitext(base)
    return stem + FACTS_SUFFIX


def is_facts_file(path):
    return path.endswith(FACTS_SUFFIX)


def read_facts(path):
    """A run's facts file, checked; None when there is none."""
    try:
        with open(path) as handle:
            facts = json.load(handle)
    except (IOError, OSError):
        return None
    except ValueError as exc:
        raise FactsError("%s is not JSON (%s): a facts file is %s" % (path, exc, FACTS_FORMAT))
    pods = facts.get("pods") if isinstance(facts, dict) else None
    nodes = facts.get("nodes", []) if isinstance(facts, dict) else None
    if not all(isinstance(found, list) and all(isinstance(item, dict) and item.get("node") for item in found)
               for found in (pods, nodes)):
        raise FactsError("%s: not a facts file, which is %s" % (path, FACTS_FORMAT))
    return facts


def run_nodes(pods, nodes):
    """Of what the probes read (``nodes``: port_counters.node_port_deltas),
    the nodes the run's pods ran on, in order: a node the run did not use
    says nothing about it."""
    used = set(pod.get("node") for pod in pods or [])
    return [(node, (nodes or {})[node]) for node in sorted(nodes or {}, key=natural_key) if node in used]


def run_facts(number, pods, nodes=None):
    """Run ``number``'s facts file, from its pods as the benchmark's verdict
    or the training run gives them (a pod never scheduled has no node and
    no facts), and what the probes read of its nodes' whole ports
    (``nodes``: port_counters.node_port_deltas; a node not read is kept
    with why)."""
    keep = ("pod", "uid", "node", "placement", "rails", "port_counters")
    facts = {"run": number, "pods": [dict((key, pod.get(key)) for key in keep if pod.get(key) is not None)
                                     for pod in pods or [] if pod.get("node")]}
    if nodes:
        facts["nodes"] = [{"node": node, "port_counters": read["ports"]} if read["ports"] is not None
                          else {"node": node, "error": read["error"]} for node, read in run_nodes(pods, nodes)]
    return facts


# -- the factors of one run --------------------------------------------------


def _placement_off(placement):
    """Why a pod's CPUs sit off its GPUs' NUMA nodes, or None."""
    placement = placement or {}
    if placement.get("spans") or placement.get("misses"):
        return "CPUs on NUMA node(s) %s, GPUs on %s" % (
            ",".join(str(node) for node in sorted((placement.get("cpus_per_numa_node") or {}), key=int)) or "?",
            ",".join(str(node) for node in placement.get("gpu_numa_nodes") or []) or "?")
    return None


def _counter_rates(delta):
    """{counter: (delta, per GB or None, netdevs)} of what moved on a port."""
    rates = {}
    moved = dict(delta.get("congestion") or {}, **(delta.get("errors") or {}))
    data_bytes = delta.get("bytes") or 0
    for counter, value in moved.items():
        if value:
            rates[counter] = (value, value * 1e9 / data_bytes if data_bytes else None, delta.get("netdevs") or [])
    return rates


def run_factors(facts):
    """{factor key: (what it is, this run's evidence, how much it moved)}
    of one run's facts, counters excepted (they need every run's figures:
    counter_factors)."""
    factors = {}
    pods = sorted((facts or {}).get("pods") or [], key=lambda pod: natural_key(pod.get("pod") or ""))
    nodes = sorted(set(pod["node"] for pod in pods), key=natural_key)
    for node in nodes:
        factors[("node", node)] = ("node %s" % node, "pods %s" % ", ".join(
            pod.get("pod") or "?" for pod in pods if pod["node"] == node), 0)
    for index, first in enumerate(nodes):
        for second in nodes[index + 1:]:
            factors[("node_pair", first, second)] = ("nodes %s and %s together" % (first, second), "", 0)
    for pod in pods:
        if pod.get("uid"):
            what = "pod %s (uid %s) on %s" % (pod.get("pod"), pod["uid"], pod["node"])
            factors[("pod", pod["node"], pod["uid"])] = (what, "", 0)
        off = _placement_off(pod.get("placement"))
        if off:
            key = ("placement",)
            previous = factors.get(key, ("", "", 0))[1]
            factors[key] = ("a pod's CPUs off its GPUs' NUMA node",
                            "; ".join(filter(None, [previous, "%s on %s: %s" % (pod.get("pod"), pod["node"], off)])), 0)
        far = ["%s-%s %s" % (rail.get("gpu"), rail.get("nic"), rail.get("distance")) for rail in pod.get("rails") or []
               if rail.get("distance") and rail["distance"] not in NEAR]
        if far:
            factors[("rail", pod["node"])] = ("a GPU far from its NIC on %s" % pod["node"],
                                              "%s: %s" % (pod.get("pod"), ", ".join(far)), 0)
    return factors


def _readings(facts):
    """(node, port, what moved there) of every port a run's facts read: the
    pods' own, and the nodes' whole ports as the probes read them (told
    apart by WHOLE_PORT: a pod's VF and its node's port are two readings)."""
    for pod in (facts or {}).get("pods") or []:
        for port, delta in (pod.get("port_counters") or {}).items():
            yield pod["node"], port, delta
    for node in (facts or {}).get("nodes") or []:
        for port, delta in (node.get("port_counters") or {}).items():
            yield node["node"], port + WHOLE_PORT, delta


def _ports_present(facts):
    """(node, port) of every port a run's facts read."""
    return set((node, port) for node, port, _delta in _readings(facts))


def counter_factors(runs):
    """{run number: {factor key: (what, evidence, delta)}} of the counters that
    moved in a run more than COUNTER_EXCESS times their usual rate: their
    median per GB (or count, without bytes) on that port over the normal
    runs, or, for a port no normal run read (its node was only in degraded
    runs), on every port the normal runs read."""
    moved = {}
    for run in runs:
        for node, port, delta in _readings(run["facts"]):
            for counter, reading in _counter_rates(delta).items():
                moved.setdefault((node, port, counter), {})[run["run"]] = reading
    normal = [run for run in runs if run["degraded"] is False]
    found = {}
    for (node, port, counter), by_run in moved.items():
        usual = _usual_rate(moved, (node, port, counter), normal)
        for number, reading in by_run.items():
            if _rate(reading) > COUNTER_EXCESS * usual:
                delta, per_gb, netdevs = reading
                what = "%s moved on %s %s%s" % (counter, node, port, " (%s)" % ",".join(netdevs) if netdevs else "")
                found.setdefault(number, {})[("counter", node, port, counter)] = (what, "+%d%s%s" % (
                    delta, " (%.3g per GB)" % per_gb if per_gb is not None else "",
                    ": " + meaning(counter) if meaning(counter) else ""), delta)
    return found


def _usual_rate(moved, key, normal):
    """A counter's usual rate: its median over the normal runs that read
    its port, or, when none did, over every port the normal runs read."""
    node, port, counter = key
    own = [run for run in normal if (node, port) in _ports_present(run["facts"])]
    if own:
        samples = [_rate(moved.get(key, {}).get(run["run"])) for run in own]
    else:
        samples = [_rate(moved.get((other_node, other_port, counter), {}).get(run["run"]))
                   for run in normal for other_node, other_port in _ports_present(run["facts"])]
    # No sample: no usual rate, read as none at all.
    return median(samples) if samples else 0.0


def _rate(reading):
    if not reading:
        return 0.0
    delta, per_gb, _netdevs = reading
    return per_gb if per_gb is not None else float(delta)


# -- ranking ------------------------------------------------------------------


def _covered_by_a_node(factor, factors):
    """Whether a pair or pod factor shows in exactly the runs one of its
    nodes does."""
    if factor["kind"] not in ("node_pair", "pod"):
        return False
    return any(other["kind"] == "node" and other["nodes"][0] in factor["nodes"]
               and (other["degraded_runs"], other["normal_runs"]) == (factor["degraded_runs"], factor["normal_runs"])
               for other in factors)


def _ranked(degraded, normal, by_run):
    """Every factor that separates, best first."""
    keys = set(key for number in degraded + normal for key in by_run.get(number, {}))
    factors = []
    for key in keys:
        in_degraded = [number for number in degraded if key in by_run.get(number, {})]
        in_normal = [number for number in normal if key in by_run.get(number, {})]
        coverage = len(in_degraded) / float(len(degraded))
        score = coverage - (len(in_normal) / float(len(normal)) if normal else 0.0)
        if coverage <= MIN_COVERAGE or score < MIN_SEPARATION or (
                len(in_degraded) < MIN_DEGRADED_RUNS and key[0] != "counter"):
            continue
        what = by_run[in_degraded[0]][key][0]
        evidence = ["run %d: %s" % (number, by_run[number][key][1]) for number in in_degraded if by_run[number][key][1]]
        factors.append({
            "kind": key[0], "factor": what, "score": round(score, 3),
            "degraded_runs": in_degraded, "normal_runs": in_normal,
            "in_degraded": "%d of %d degraded runs" % (len(in_degraded), len(degraded)),
            "in_normal": "%d of %d normal runs" % (len(in_normal), len(normal)),
            "evidence": evidence,
            "nodes": list(key[1:3]) if key[0] == "node_pair" else [key[1]] if len(key) > 1 else [],
            "port": key[2] if key[0] == "counter" else None,
            "counter": key[3] if key[0] == "counter" else None,
            "moved": sum(by_run[number][key][2] for number in in_degraded),
        })
    factors = [factor for factor in factors if not _covered_by_a_node(factor, factors)]
    return sorted(factors, key=lambda factor: (-factor["score"], -len(factor["degraded_runs"]),
                                               KIND_ORDER.index(factor["kind"]), -factor["moved"],
                                               natural_key(factor["factor"])))


def attribute(runs, noise=None):
    """What separates the degraded runs (``runs``: each with ``run``, its
    number, ``degraded``, True, False, or None when not measured,
    ``facts``, its facts or None). ``noise``: how far the degraded runs
    fall below the normal ones against the normal runs' own scatter
    (throughput.noise), or None. Returns the verdict (one of ATTRIBUTED, NOTHING, CANNOT_TELL (the
    degraded runs fall within the normal runs' scatter), NO_DEGRADED,
    ALL_DEGRADED, NO_FACTS), a sentence that says it, and the separating
    factors, best first (under CANNOT_TELL: candidates, not named)."""
    judged = [run for run in runs if run["degraded"] is not None]
    with_facts = [run for run in judged if run.get("facts")]
    degraded = [run["run"] for run in with_facts if run["degraded"]]
    normal = [run["run"] for run in with_facts if not run["degraded"]]
    result = {"verdict": None, "summary": None, "factors": [], "noise": None, "degraded_runs": degraded,
              "normal_runs": normal,
              "runs_without_facts": [run["run"] for run in judged if not run.get("facts")]}
    if not any(run["degraded"] for run in judged):
        result.update(verdict=NO_DEGRADED, summary="no run degraded: nothing to attribute")
        return result
    if not degraded:
        result.update(verdict=NO_FACTS, summary="the degraded runs have no facts recorded beside their logs "
                                                "(<log>%s): nothing to attribute them to" % FACTS_SUFFIX)
        return result
    by_run = dict((run["run"], run_factors(run["facts"])) for run in with_facts)
    for number, factors in counter_factors(with_facts).items():
        by_run[number].update(factors)
    factors = _ranked(degraded, normal, by_run)
    result["factors"] = factors
    runs_text = "run%s %s" % ("s" if len(degraded) > 1 else "", ", ".join(str(number) for number in degraded))
    result["noise"] = noise
    if noise and noise["within"]:
        # What separates them is kept (candidates), not named.
        result.update(verdict=CANNOT_TELL, summary=(
            "cannot tell what slowed the degraded %s: they are %.1f%% below the normal runs' median, within %d "
            "times the normal runs' own scatter (%.1f%%, 1.4826 MAD), so they may be noise; more runs, or a saved "
            "baseline, can tell" % (runs_text, 100 * noise["shortfall"], NOISE_SIGMAS, 100 * noise["scatter"])))
        return result
    if not normal:
        result.update(verdict=ALL_DEGRADED, summary=(
            "every run with facts is degraded (%s): there is no normal run to compare with; what they share is "
            "listed, and a saved baseline or runs on other nodes can separate it" % runs_text))
    elif factors:
        top = factors[0]
        result.update(verdict=ATTRIBUTED, summary="degraded %s: %s (in %s, %s)" % (
            runs_text, top["factor"], top["in_degraded"], top["in_normal"]))
    else:
        result.update(verdict=NOTHING, summary=(
            "nothing measured separates the degraded %s from the %d normal one(s): the same nodes, pods and "
            "placement, and no counter that moved only in them; look at what was not measured (other jobs on "
            "the nodes or the fabric, the storage, the software)" % (runs_text, len(normal))))
    return result
