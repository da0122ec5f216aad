# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Every verdict verify-rdma.yml and train.yml give, decided in one place.

The node checks (node_checks), NCCL's transport (nccl_log) and the
collective benchmark (collective_bench) each judge what they measured; this
module turns their results, as the roles collect them from the pods, into
the verdicts the operator reads: one per node, per training pod and for the
benchmark, the report's overall verdict with what changed since the
previous run, whether the fabric is fit to train on, and the state of a
training run. The roles only present what it returns (the filters of
plugins/filter/verdicts.py).

A verdict is ``pass``, ``warn``, ``fail`` or ``not-checked``; each carries
its findings, ``{name, status, message, remediation, evidence}``. A check
that could not be measured is never a pass: a source none of whose checks
measured anything, a probe that did not run, a benchmark that gave no
document are ``not-checked``, which only ``fail`` outranks.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ..common.status import FAIL, NOT_CHECKED, PASS, SKIP, WARN
from ..fabric.bench_expectation import BUSBW_EXPECTED, EXPECTED_FIX, expectation
from .degradation import run_nodes
from ..fabric.port_counters import counter_rows, moved_errors, node_counter_rows, node_port_deltas
from ..workload.train_jobs import RUN_LABEL
from ..workload.probe_manifests import PROBED_NODE_ANNOTATION

# Worst first: a failure outranks a check that could not be made, which
# outranks a warning.
SEVERITY = (FAIL, NOT_CHECKED, WARN, PASS)
# verify_fail_on: the verdicts that make the fabric unfit.
FAIL_ON_LEVELS = {"fail": (FAIL, NOT_CHECKED), "warn": (FAIL, NOT_CHECKED, WARN), "never": ()}

# The benchmark's own checks, beside collective_bench.FINDING_CHECKS and
# nccl_log's transport check.
BENCH_RUN = "bench_run"
PORT_COUNTERS = "port_counters"
# How a pairwise run's slow pair is fixed, and how to find it without one.
GATE_FIX_PAIRWISE = "a pair of pods is slower than the others: see the suspect node and the node findings"
GATE_FIX_SWEEP = ("run verify-rdma.yml -e verify_bench_pairwise=true to measure every pair of pods and name the "
                  "slow node")

# The states of a training run (mlinfra train status and the Job modes).
RUNNING, SUCCEEDED, STOPPED, FAILED = "running", "succeeded", "stopped", "failed"
NO_ANSWER = "no answer"


def worst_of(statuses):
    """The worst of ``statuses`` by SEVERITY (a check's ``skip`` counts as
    nothing); ``not-checked`` when none of them measured anything."""
    present = set(statuses)
    for status in SEVERITY:
        if status in present:
            return status
    return NOT_CHECKED


def finding(name, status, message, remediation=None, evidence=None):
    """One finding as every report shows it."""
    return {"name": name, "status": status, "message": message, "remediation": remediation or None,
            "evidence": list(evidence or [])}


def _evidence(check):
    """The quoted lines a check kept: nccl_log keeps them per question in
    data.evidence, others may give a list of lines."""
    kept = check.get("evidence")
    if kept is None:
        kept = (check.get("data") or {}).get("evidence") if isinstance(check.get("data"), dict) else None
    if isinstance(kept, dict):
        kept = [line for lines in kept.values() for line in (lines or [])]
    return [line for line in kept or [] if isinstance(line, str)]


def check_findings(checks):
    """The failed and warned checks of one source, as findings."""
    return [finding(check["name"], check["status"], check.get("message"), check.get("remediation"), _evidence(check))
            for check in checks if check.get("status") in (FAIL, WARN)]


# How a skipped check is named where a verdict lists what it did not check.
CHECK_WORDS = {"roce_lossless": "lossless RoCE", "nccl_transport": "transport", "gpu_nic_rails": "rails",
               "pod_rails": "rails", "cpu_placement": "CPU placement", "kubelet_topology": "kubelet topology",
               "busbw_gate": "gate", "network": "network traffic", "ipc_lock": "IPC_LOCK", "memlock": "memlock",
               "pcie_acs": "PCIe ACS", "mtu": "MTU", "roce_gid": "RoCE GID", "nvlink_topology": "NVLink topology"}


def check_words(name):
    return CHECK_WORDS.get(name, name.replace("_", " "))


def skipped_checks(checks):
    """[{name, message}] of the checks that were skipped for want of what
    they read: what a pass did not establish. A check with nothing to look
    at by design (node_checks' not_applicable: tcp mode, InfiniBand ports
    for a RoCE check) is not among them."""
    return [{"name": check["name"], "message": check.get("message") or "skipped"} for check in checks
            if check.get("status") == SKIP and check.get("name") and not check.get("not_applicable")]


def not_checked_words(not_checked):
    """3 not checked: transport, gate, lossless RoCE (each name once, as
    first met); "" when nothing was left unchecked."""
    names = []
    for item in not_checked or []:
        words = check_words(item["name"])
        if words not in names:
            names.append(words)
    return "%d not checked: %s" % (len(names), ", ".join(names)) if names else ""


def verdict_words(status, not_checked=()):
    """A verdict as a reader sees it: PASS, or PASS, 3 not checked:
    transport, gate, lossless RoCE."""
    badge = {NOT_CHECKED: "NOT CHECKED"}.get(status, status.upper())
    skipped = not_checked_words(not_checked)
    return "%s, %s" % (badge, skipped) if skipped else badge


# The checks of where things sit, shown for every node and pod whatever
# their status (the report's section on rails, placement and lossless RoCE).
LAYOUT_CHECKS = ("gpu_nic_rails", "pod_rails", "cpu_placement", "kubelet_topology", "roce_lossless")


def _layout(checks):
    """{check: {status, message, rails}} of the LAYOUT_CHECKS made; rails
    as GPU-NIC distance, from a rail table's data."""
    layout = {}
    for check in checks:
        if check.get("name") in LAYOUT_CHECKS:
            rails = (check.get("data") or {}).get("rails") or []
            layout[check["name"]] = {"status": check.get("status"), "message": check.get("message"),
                                     "rails": ["%s-%s %s" % (rail["gpu"], rail["nic"], rail["distance"])
                                               for rail in rails if isinstance(rail, dict) and "nic" in rail]}
    return layout


def checks_verdict(document):
    """The verdict of one mlinfra node-check JSON document: the worst of its
    checks, or not-checked with the reason when none measured anything."""
    checks = document.get("checks") or []
    status = worst_of(check.get("status") for check in checks)
    error = None if status != NOT_CHECKED else "no check could be made (%d skipped)" % len(checks)
    return {"status": status, "checks": check_findings(checks), "summary": document.get("summary"), "error": error,
            "layout": _layout(checks), "not_checked": skipped_checks(checks)}


def _exec_failure(found):
    """Why an exec gave no JSON document."""
    return found.get("error") or (found.get("stderr") or "").strip() or "no output"


def _not_checked(why, **keys):
    """A subject that could not be examined, and why."""
    return dict(keys, status=NOT_CHECKED, checks=[], error=why)


def _document(found):
    document = (found or {}).get("json")
    return document if isinstance(document, dict) else None


# -- nodes -------------------------------------------------------------------


def _probe_not_running(pod, timeout, namespace):
    status = pod.get("status") or {}
    waiting = ((status.get("containerStatuses") or [{}])[0].get("state") or {}).get("waiting") or {}
    name = pod["metadata"]["name"]
    return "probe pod %s did not run within %ss (%s%s); kubectl describe pod %s -n %s" % (
        name, timeout, status.get("phase") or "Pending", (": " + waiting["reason"]) if waiting.get("reason") else "",
        name, namespace)


def node_verdicts(nodes, probes, execs, timeout, namespace, not_probed=None):
    """One verdict per GPU node from its probe pod (``probes``, the pods as
    k8s_info lists them, each annotated with the node it probes) and the
    node checks' exec in it (``execs``, pods_exec's ``pods``); every node
    not-checked for the reason ``not_probed`` when no probe was started."""
    if not_probed:
        return [_not_checked(not_probed, node=node, pod=None) for node in nodes]
    by_pod = dict((found["pod"], found) for found in execs or [])
    by_node = dict(((pod["metadata"].get("annotations") or {}).get(PROBED_NODE_ANNOTATION), pod) for pod in probes or [])
    results = []
    for node in nodes:
        pod = by_node.get(node)
        name = pod["metadata"]["name"] if pod else None
        found = by_pod.get(name) if pod else None
        document = _document(found)
        if document is not None:
            result = {"node": node, "pod": name}
            result.update(checks_verdict(document))
        else:
            if not pod:
                why = "no probe pod"
            elif found:
                why = "the checks gave no result in %s: %s" % (name, _exec_failure(found))
            else:
                why = _probe_not_running(pod, timeout, namespace)
            result = _not_checked(why, node=node, pod=name)
        results.append(result)
    return results


# -- training pods -----------------------------------------------------------


def _detected_nccl(document):
    """What a pod's init container detected, as the report shows it."""
    if not isinstance(document, dict):
        return None
    return {"transport": document.get("transport"), "rdma_ports": len(document.get("rdma_ports") or []),
            "gpus": document.get("gpus"), "gpudirect": document.get("gpudirect"),
            "nccl_version": document.get("nccl_version"), "env": document.get("env")}


def pod_verdicts(execs, detected, replicas, app_name):
    """One verdict per training pod from the in-pod checks' exec
    (``execs``) and what its init container detected (``detected``,
    autodetect's readback); an ordinal of the StatefulSet's ``replicas``
    without a running pod is not-checked."""
    detected_by_pod = dict((found["pod"], found.get("json")) for found in detected or [])
    results = []
    for found in execs or []:
        result = {"pod": found["pod"], "node": found.get("node"), "nccl": _detected_nccl(detected_by_pod.get(found["pod"]))}
        document = _document(found)
        if document is not None:
            result.update(checks_verdict(document))
        else:
            result.update(_not_checked("the checks gave no result: %s" % _exec_failure(found)))
        results.append(result)
    running = set(result["pod"] for result in results)
    for ordinal in range(int(replicas or 0)):
        name = "%s-%d" % (app_name, ordinal)
        if name not in running:
            results.append(_not_checked("not running", pod=name, node=None, nccl=None))
    return sorted(results, key=lambda result: result["pod"])


# -- the collective benchmark ------------------------------------------------


def _bench_run_failure(item, run):
    if run is None:
        return "pod %s: no result: %s" % (item["pod"], _exec_failure(item))
    what = run.get("error") or "torchrun exited with %s" % run.get("exit_code")
    tail = (" - " + run["log_tail"][-1]) if run.get("log_tail") else ""
    return "pod %s: %s%s (log in the pod: %s)" % (item["pod"], what, tail, run.get("log"))


def _document_findings(document, pairwise):
    """The benchmark document's own findings (collective_bench.judge); a
    document written before they were structured has only its reasons."""
    gate_fix = GATE_FIX_PAIRWISE if pairwise else GATE_FIX_SWEEP
    if "findings" not in document:
        return [finding("bench_result", FAIL, reason) for reason in document.get("reasons") or []]
    return [finding(found["check"], FAIL, found["message"], gate_fix if found["check"] == "busbw_gate" else None)
            for found in document["findings"]]


COUNTERS_FIX = ("An error counter that moves while the benchmark runs is that NIC's fault or its link's: look at the "
                "cable and transceiver (ethtool -m), the switch port's own counters, and on RoCE whether the fabric is "
                "lossless on NCCL's traffic class (PFC and ECN); run verify-rdma.yml again to see whether it moves again.")


def _counters_finding(pods, node_deltas):
    messages = moved_errors(pods, node_deltas)
    return finding(PORT_COUNTERS, WARN, "; ".join(messages), COUNTERS_FIX) if messages else None


def _bench_not_checked(pods, thresholds, from_fabric):
    """What a benchmark that ran did not establish: the transport where
    NCCL's log could not tell it, a gate when no size had one (neither
    verify_bench_min_busbw nor the rails' line rate), and the network when
    no RDMA port of any pod moved a byte (the traffic stayed inside a node
    or took TCP)."""
    found = []
    for pod in pods:
        transport = pod.get("transport") or {}
        if transport.get("status") == SKIP and not any(item["name"] == transport.get("name") for item in found):
            found.append({"name": transport.get("name") or "nccl_transport",
                          "message": "pod %s: %s" % (pod["pod"], transport.get("message"))})
    if not thresholds and (from_fabric or {}).get("status") not in (PASS, FAIL):
        found.append({"name": "busbw_gate", "message": "no size had a bus bandwidth gate (verify_bench_min_busbw, or "
                      "the rails' line rate: verify_bench_line_rate_fraction): any bandwidth passed"})
    ports = [port for pod in pods for port in (pod.get("port_counters") or {}).values() if isinstance(port, dict)]
    if ports and not any(port.get("bytes") for port in ports):
        found.append({"name": "network", "message": "none of the pods' %d RDMA port(s) moved a byte during the "
                      "benchmark: its traffic stayed inside a node or took TCP" % len(ports)})
    return found


def bench_verdict(execs, blocker=None, thresholds=(), pairwise=False, expected=None, probe_counters=None):
    """The benchmark's verdict from every pod's mlinfra pod-bench result
    (``execs``): a pod whose torchrun did not finish is not-checked, its
    NCCL transport check counts as it is, and pod 0's document adds its
    gates and pairs. ``blocker`` says why it did not run at all.
    ``expected`` ({fraction, from_size, overridden}) adds the gate from
    the pods' rails (bench_expectation). ``probe_counters`` ({before,
    after}: the probes' readings around the run) adds what the whole ports
    of every probed node moved."""
    checks = []
    pods = []
    leader = None
    for item in sorted(execs or [], key=lambda found: found["pod"]):
        run = _document(item)
        if run is not None and run.get("node_rank") == 0 and leader is None:
            leader = run
        if run is None or run.get("error") or run.get("exit_code") not in (0, 1):
            checks.append(finding(BENCH_RUN, NOT_CHECKED, _bench_run_failure(item, run)))
        transport = (run or {}).get("transport")
        if transport and transport.get("status") in (FAIL, WARN):
            checks.append(finding(transport["name"], transport["status"], "pod %s: %s" % (item["pod"], transport["message"]),
                                  transport.get("remediation"), _evidence(transport)))
        pods.append({"pod": item["pod"], "node": item.get("node"), "uid": item.get("uid"),
                     "exit_code": (run or {}).get("exit_code"),
                     "seconds": (run or {}).get("seconds"), "log": (run or {}).get("log"),
                     "nccl": (run or {}).get("nccl"), "transport": transport,
                     "port_counters": (run or {}).get("port_counters"),
                     "placement": (run or {}).get("placement"), "rails": (run or {}).get("rails"),
                     "rail_bandwidth": (run or {}).get("rail_bandwidth")})
    document = leader.get("document") if leader else None
    if document:
        checks.extend(_document_findings(document, pairwise))
    node_deltas = node_port_deltas((probe_counters or {}).get("before"), (probe_counters or {}).get("after"))
    counters = _counters_finding(pods, node_deltas)
    if counters:
        checks.append(counters)
    from_fabric = None
    if expected and blocker is None:
        from_fabric = expectation(document, pods, float(expected["fraction"]), str(expected["from_size"]),
                                  bool(expected.get("overridden")))
        if from_fabric["status"] == FAIL:
            checks.append(finding(BUSBW_EXPECTED, FAIL, from_fabric["message"], EXPECTED_FIX))
    if blocker is None and leader is None and not checks:
        checks.append(finding(BENCH_RUN, NOT_CHECKED, "pod 0 gave no result"))
    not_checked = _bench_not_checked(pods, thresholds, from_fabric) if blocker is None and document else []
    statuses = [check["status"] for check in checks]
    if blocker is not None:
        status = NOT_CHECKED
    elif FAIL in statuses:
        status = FAIL
    elif not document:
        status = NOT_CHECKED
    else:
        status = worst_of(statuses + [PASS])
    return {"subject": "benchmark", "status": status, "error": blocker, "checks": checks,
            "not_checked": not_checked, "words": verdict_words(status, not_checked),
            "thresholds": list(thresholds or []), "pods": pods, "document": document, "counters": counter_rows(pods),
            "node_counters": node_counter_rows(node_deltas), "node_port_counters": node_deltas,
            "expected": from_fabric}


def bench_line(result):
    """The benchmark's verdict in one line: its words (what it did not
    check too), why it did not run, each op's average bus bandwidth, each
    finding, and each pod's transport check that said something."""
    parts = ["benchmark %s%s" % (result.get("words") or verdict_words(result["status"]),
                                 ": %s" % result["error"] if result.get("error") else "")]
    for op, block in sorted(((result.get("document") or {}).get("ops") or {}).items()):
        busbw, sizes = block.get("avg_busbw_gbps") or 0, len(block.get("rows") or [])
        parts.append("%s average busbw %.2f GB/s over %d sizes" % (op, busbw, sizes))
    parts.extend("%s %s: %s" % (check["name"], check["status"], check["message"]) for check in result.get("checks") or [])
    parts.extend("%s: NCCL transport %s: %s" % (pod["pod"], pod["transport"]["status"], pod["transport"]["message"])
                 for pod in result.get("pods") or [] if pod.get("transport"))
    return "; ".join(parts)


# -- the report --------------------------------------------------------------


def _changes(kind, key, now, before):
    was = dict((item[key], item["status"]) for item in before or [])
    return ["%s %s: %s -> %s" % (kind, item[key], was[item[key]], item["status"])
            for item in now if item[key] in was and was[item[key]] != item["status"]]


def _bandwidth_changes(bench, before):
    ops_before = ((before or {}).get("document") or {}).get("ops") or {}
    lines = []
    for op, block in (((bench or {}).get("document") or {}).get("ops") or {}).items():
        was = (ops_before.get(op) or {}).get("avg_busbw_gbps")
        now = block.get("avg_busbw_gbps")
        if was and now:
            lines.append("%s average busbw: %.2f -> %.2f GB/s (%+.0f%%)" % (op, was, now, (now / was - 1) * 100))
    return lines


def verify_report(nodes, pods, bench, notes, previous, meta):
    """The verification report: each node and pod with its subject line,
    the benchmark, ``notes`` (what was not there to check: never a pass),
    the overall verdict (the worst of all), and what changed since
    ``previous``, the last report (``{}`` when none). ``meta`` gives the
    cluster, namespace, mode and time."""
    nodes = [dict(item, subject="node %s" % item["node"]) for item in nodes or []]
    pods = [dict(item, subject="pod %s%s" % (item["pod"], (" on %s" % item["node"]) if item.get("node") else ""))
            for item in pods or []]
    previous = previous or {}
    changes = _changes("node", "node", nodes, previous.get("nodes")) + _changes("pod", "pod", pods, previous.get("pods"))
    bandwidth = []
    if bench:
        before = previous.get("bench") or {}
        if before.get("status", bench["status"]) != bench["status"]:
            changes.append("benchmark: %s -> %s" % (before["status"], bench["status"]))
        bandwidth = _bandwidth_changes(bench, before)
    statuses = [item["status"] for item in nodes + pods + ([bench] if bench else [])]
    if notes:
        statuses.append(NOT_CHECKED)
    for item in nodes + pods:
        item["words"] = verdict_words(item["status"], item.get("not_checked"))
    # Every check a subject skipped, with the subject: a pass says what it
    # did not look at.
    not_checked = [dict(skipped, subject=item["subject"]) for item in nodes + pods + ([bench] if bench else [])
                   for skipped in item.get("not_checked") or []]
    verdict = worst_of(statuses)
    report = dict(meta)
    report.update({"verdict": verdict, "words": verdict_words(verdict, not_checked), "not_checked": not_checked,
                   "nodes": nodes, "pods": pods, "bench": bench, "notes": list(notes or []),
                   "previous": {"time": previous.get("time"), "changes": changes, "bandwidth": bandwidth}})
    return report


def fabric_fitness(report, fail_on):
    """Whether the fabric is fit to train on under ``verify_fail_on``:
    ``blocking``, each node, pod or benchmark whose verdict is at a failing
    level with only its checks at that level; ``missing``, the notes (a
    missing source is not a pass unless fail_on is never); ``failing``, the
    subjects that fail or were not checked whatever fail_on says."""
    if fail_on not in FAIL_ON_LEVELS:
        raise ValueError("verify_fail_on must be one of %s, got %r" % (", ".join(FAIL_ON_LEVELS), fail_on))
    levels = FAIL_ON_LEVELS[fail_on]
    sources = report["nodes"] + report["pods"] + ([report["bench"]] if report.get("bench") else [])
    blocking = [dict(item, checks=[check for check in item["checks"] if check["status"] in levels])
                for item in sources if item["status"] in levels]
    missing = list(report.get("notes") or []) if fail_on != "never" else []
    failing = [item["subject"] for item in report["nodes"] + report["pods"] if item["status"] in (FAIL, NOT_CHECKED)]
    # The nodes that run none of the pods checked: what fails there does
    # not touch the pods, and is said apart.
    pod_nodes = set(item.get("node") for item in report["pods"] if item.get("node"))
    podless = [item["node"] for item in blocking if item["subject"].startswith("node ") and item["node"] not in pod_nodes]
    return {"fit": not blocking and not missing, "blocking": blocking, "missing": missing, "failing": failing,
            "podless_only": bool(report["pods"]) and bool(blocking) and len(podless) == len(blocking),
            "podless": podless}


def fitness_line(report, fitness, fail_on, report_path):
    """What verify-rdma.yml ends with: the fabric's verdict with what it did
    not check, what blocks it (each subject with its failing checks and
    fixes), whether only nodes without pods fail, and the report's path."""
    if not fitness["fit"]:
        words = []
        for item in fitness["blocking"]:
            text = "%s %s" % (item["subject"], item["status"].upper())
            if item.get("error"):
                text += ": %s" % item["error"]
            for check in item["checks"]:
                text += ": %s: %s" % (check["name"], check["message"])
                if check.get("remediation"):
                    text += " (fix: %s)" % check["remediation"]
            words.append(text)
        words.extend(fitness["missing"])
        if fitness.get("podless_only"):
            words.append("the %d pod(s), their node(s) and the benchmark pass: what fails is on node(s) that run no "
                         "pod (%s), which deploy.yml keeps pods off once verify-rdma.yml labels them "
                         "(-e verify_label_nodes=true)" % (len(report["pods"]), ", ".join(fitness["podless"])))
        return "the GPU fabric of %s is not fit to train on: %s; report: %s" % (
            report.get("cluster"), "; ".join(words), report_path)
    failing = ""
    if fitness["failing"]:
        failing = "; %d failing (%s; verify_fail_on=%s: reported, not fatal)" % (
            len(fitness["failing"]), ", ".join(fitness["failing"]), fail_on)
    return "%d node(s) and %d pod(s) checked: %s%s; report: %s" % (
        len(report["nodes"]), len(report["pods"]), report.get("words") or verdict_words(report["verdict"]), failing,
        report_path)


# -- training runs -----------------------------------------------------------


def pod_run_state(found):
    """One pod's state from its mlinfra train status exec (pods_exec's
    entry); ``no answer`` when it gave no document."""
    document = _document(found) or {}
    return document.get("state") or NO_ANSWER


def run_state(pods):
    """A run's state from each pod's mlinfra train status (pods_exec's
    ``pods``): succeeded when every pod did, running while the others still
    run, stopped when some were stopped and none failed, and failed
    otherwise (a failed rank, or a pod that gave no answer)."""
    found = set(pod_run_state(pod) for pod in pods)
    if not found:
        return FAILED
    if found == {SUCCEEDED}:
        return SUCCEEDED
    if found <= {RUNNING, SUCCEEDED}:
        return RUNNING
    if found <= {RUNNING, SUCCEEDED, STOPPED}:
        return STOPPED
    return FAILED


def job_run_state(pods, replicas, seen_before, run=None):
    """A Job-mode run's state from its pods (train_job_pods' entries) and,
    when given, its object as k8s_info returns it: failed as soon as one pod
    failed or the operator says the run failed (it may have deleted the
    pods that would say it), succeeded once ``replicas`` pods did, stopped
    when pods were ``seen_before`` and all are gone (the run's object was
    deleted), else running."""
    states = [pod["state"] for pod in pods]
    if FAILED in states or (run and run_object_status(run)["failed"]):
        return FAILED
    if states.count(SUCCEEDED) >= int(replicas):
        return SUCCEEDED
    if seen_before and not pods:
        return STOPPED
    return RUNNING


_ACTIVE_PHASES = ("Pending", "Running")


def runs_in_progress(exec_pods, job_pods):
    """The training runs still going in a namespace, which a deploy, scale or
    teardown would kill: [{"run", "mode", "pods"}] by run. ``exec_pods``:
    pods_exec's pods that ran ``mlinfra train status`` for each StatefulSet
    pod's current run (the exec start mode); ``job_pods``: the namespace's
    pods as k8s_info returns them, of which those labelled RUN_LABEL count
    (the Job start modes: a run is going while one of its pods is Pending or
    Running and not being deleted). A pod that gave no answer is not taken
    for a run."""
    runs = {}
    for found in exec_pods:
        document = _document(found) or {}
        if document.get("state") == RUNNING:
            runs.setdefault((document.get("run_id") or "(unnamed)", "exec"), []).append(found.get("pod"))
    for pod in job_pods:
        metadata = pod.get("metadata") or {}
        run = (metadata.get("labels") or {}).get(RUN_LABEL)
        if run and (pod.get("status") or {}).get("phase", "Pending") in _ACTIVE_PHASES \
                and not metadata.get("deletionTimestamp"):
            runs.setdefault((run, "job"), []).append(metadata.get("name"))
    return [{"run": run, "mode": mode, "pods": sorted(pods)} for (run, mode), pods in sorted(runs.items())]


# How each start mode's object says it has ended, as its controller writes
# it: a condition of one of these types with status "True" (batch/v1 Job;
# Kubeflow Training Operator v1; JobSet; Kubeflow Trainer v2), or, for a
# Volcano Job, one of these phases in status.state (Completed the one
# success).
ENDED_CONDITIONS = {
    "Job": ("Complete", "Failed"),
    "PyTorchJob": ("Succeeded", "Failed"),
    "JobSet": ("Completed", "Failed"),
    "TrainJob": ("Complete", "Failed"),
}
ENDED_PHASES = {"Job": ("Completed", "Failed", "Terminated", "Aborted")}
_VOLCANO_GROUP = "batch.volcano.sh/"


def run_object_status(run):
    """What a run's object (as k8s_info returns it) says of its run, in its
    operator's words: {ended, failed, words}. words is "<kind> <latest
    condition that holds or phase>: <its message>", empty while the operator
    has written nothing; a Volcano Job still gathering its gang says how
    many of its pods run."""
    kind = run.get("kind", "")
    status = run.get("status") or {}
    if (run.get("apiVersion") or "").startswith(_VOLCANO_GROUP):
        state = status.get("state") or {}
        phase = state.get("phase") or ""
        ended = phase in ENDED_PHASES["Job"]
        words = "Volcano Job %s" % phase if phase else ""
        if phase == "Pending" and status.get("minAvailable"):
            words += " (%d of a gang of %d running)" % (int(status.get("running") or 0), int(status["minAvailable"]))
        if phase and state.get("message"):
            words += ": " + state["message"]
        return {"ended": ended, "failed": ended and phase != ENDED_PHASES["Job"][0], "words": words}
    holding = [condition for condition in status.get("conditions") or () if condition.get("status") == "True"]
    ending = [condition for condition in holding if condition.get("type") in ENDED_CONDITIONS.get(kind, ())]
    # Controllers append conditions as they come: the last that holds is the news.
    shown = (ending or holding or [None])[-1]
    words = ""
    if shown:
        words = "%s %s" % (kind, shown.get("type")) + (": " + shown["message"] if shown.get("message") else "")
    failed = any(condition.get("type") == "Failed" for condition in ending)
    return {"ended": bool(ending), "failed": failed, "words": words}


def runs_going(runs):
    """The names of the run objects that have not ended, sorted: the runs a
    stop has to delete (an ended run keeps its object and pods for its logs)."""
    return sorted(run["metadata"]["name"] for run in runs if not run_object_status(run)["ended"])


# Kueue (kueue.x-k8s.io/v1beta2, v0.15 and later) makes a Workload for each
# run object it manages, labelled kueue.x-k8s.io/job-uid with the object's
# uid (roles/train/tasks/job-queue.yml reads it so); the object stays
# suspended until the Workload's Admitted condition holds.


def local_queue_problem(found, queue_name, namespace):
    """Why a run put on LocalQueue ``queue_name`` would never be admitted,
    from k8s_info's answer for that LocalQueue (``found``: api_found,
    resources), naming train_queue_name and the fix; empty when the queue is
    there and active. Kueue holds such a run without an error of its own."""
    if not found.get("api_found", True):
        return ("train_queue_name is %s, but the cluster serves no kueue.x-k8s.io/v1beta2 LocalQueue (Kueue v0.15 "
                "or later); fix: install Kueue, or leave train_queue_name empty" % queue_name)
    queues = found.get("resources") or []
    if not queues:
        return ("train_queue_name: LocalQueue %s/%s does not exist, and Kueue would hold the run until it does; fix: "
                "a LocalQueue of the namespace (kubectl get localqueues -n %s), or ask the cluster's admins for one"
                % (namespace, queue_name, namespace))
    conditions = (queues[0].get("status") or {}).get("conditions") or ()
    inactive = [condition for condition in conditions
                if condition.get("type") == "Active" and condition.get("status") == "False"]
    if inactive:
        return ("train_queue_name: LocalQueue %s/%s admits nothing: %s; fix: its ClusterQueue (spec.clusterQueue) "
                "must exist and be active, or take another LocalQueue"
                % (namespace, queue_name, inactive[0].get("message") or inactive[0].get("reason") or "inactive"))
    return ""


def queue_admission(workloads, queue_name):
    """Whether Kueue lets a run queued on LocalQueue ``queue_name`` start,
    from its Workloads as k8s_info returns them: {admitted, words}.
    admitted once a Workload's Admitted condition holds (quota reserved in a
    ClusterQueue, every admission check passed), and it stays so after the
    Workload finished; words say where the run stands in Kueue's words: the
    ClusterQueue that admitted it, or why it waits (the message of the
    condition Kueue changed last, such as QuotaReserved's, which names the
    quota that is short), or that Kueue has made no Workload yet."""
    if not workloads:
        return {"admitted": False,
                "words": "LocalQueue %s: no Workload for the run yet (Kueue makes one for each run object it "
                         "manages)" % queue_name}
    # One Workload per run object; a second would be Kueue's replacement of
    # the first, the newest the news.
    workload = sorted(workloads, key=lambda item: (item.get("metadata") or {}).get("creationTimestamp") or "")[-1]
    status = workload.get("status") or {}
    conditions = dict((condition.get("type"), condition) for condition in status.get("conditions") or ())
    admitted = any(conditions.get(kind, {}).get("status") == "True" for kind in ("Admitted", "Finished"))
    if admitted:
        cluster_queue = (status.get("admission") or {}).get("clusterQueue") or "?"
        return {"admitted": True, "words": "LocalQueue %s: admitted by ClusterQueue %s" % (queue_name, cluster_queue)}
    # Why it waits: QuotaReserved's message names the quota that is short;
    # past the quota, Admitted's names the admission checks; else the
    # condition Kueue changed last (an eviction, say).
    held = [conditions[kind] for kind in ("QuotaReserved", "Admitted")
            if conditions.get(kind, {}).get("status") == "False" and conditions[kind].get("message")]
    latest = sorted(conditions.values(), key=lambda condition: condition.get("lastTransitionTime") or "")
    said = (held or latest[-1:] or [{}])[0]
    words = "LocalQueue %s: not admitted" % queue_name
    if said.get("message"):
        words += ": " + said["message"]
    return {"admitted": False, "words": words}


# -- soak runs ---------------------------------------------------------------


def soak_report(runs, judged, meta):
    """The soak report from each run (``runs``: run, time, file, measured,
    status, error, pods, nodes: what the probes read) and throughput_report's judgement of the measured
    ones (``judged``, its ``runs``): each run's throughput and whether it
    is degraded, the runs degraded and the runs not measured (never a
    pass)."""
    by_path = dict((figure["path"], figure) for figure in judged or [])
    report_runs = []
    for run in runs:
        figure = by_path.get(run["file"]) if run.get("measured") else None
        report_runs.append({
            "run": run["run"], "time": run["time"], "file": run["file"] if run.get("measured") else None,
            "pods": run.get("pods"), "nodes": dict(run_nodes(run.get("pods"), run.get("nodes"))),
            "status": run.get("status"), "error": run.get("error"),
            "throughput": figure.get("throughput") if figure else None,
            "unit": figure.get("unit") if figure else None,
            "below_baseline": figure.get("below_baseline") if figure else None,
            "degraded": figure.get("degraded") if figure else None,
            "reasons": figure.get("reasons") if figure else [run.get("error") or "not measured"],
            "not_checked": run.get("not_checked") or [],
        })
    report = dict(meta)
    failed = dict((entry["name"], entry.get("date")) for entry in meta.get("failed_nodes") or [])
    # A node verify-rdma.yml failed that took part: said whatever the
    # attribution finds, since a pod only lands there when placed by hand.
    took_part = []
    for name in sorted(failed):
        numbers = [run["run"] for run in report_runs if any((pod or {}).get("node") == name
                                                            for pod in run["pods"] or [])]
        if numbers:
            took_part.append({"node": name, "date": failed[name], "runs": numbers,
                              "message": "node %s, which verify-rdma.yml failed%s, took part in run%s %s" % (
                                  name, " (%s)" % failed[name] if failed[name] else "", "s" if len(numbers) > 1
                                  else "", ", ".join(str(number) for number in numbers))})
    # What the benchmark runs did not establish (verify's not_checked of
    # each run), each once with the runs it concerns: a soak's figures say
    # nothing of a transport or a network no run could see.
    not_checked = []
    for run in report_runs:
        for item in run["not_checked"]:
            known = [entry for entry in not_checked if entry["name"] == item["name"]]
            if known:
                known[0]["runs"].append(run["run"])
            else:
                not_checked.append({"name": item["name"], "words": check_words(item["name"]),
                                    "message": item.get("message"), "runs": [run["run"]]})
    report.update({"runs": report_runs,
                   "degraded": [run["run"] for run in report_runs if run["degraded"]],
                   "not_measured": [run["run"] for run in report_runs if run["throughput"] is None],
                   "failed_nodes": took_part, "not_checked": not_checked,
                   "not_checked_words": not_checked_words(not_checked)})
    return report
