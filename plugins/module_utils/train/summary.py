# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The line a successful training run ends with, in every start mode: where
it ran, its throughput (and MFU where the log gives it), how the loss moved,
whether it is degraded against its baseline, and where its logs went.

The loss comes from the run's first pod (node rank 0, whose log the
throughput is read from), as ``mlinfra train status`` or the Job modes'
reading of a pod's log report it; a figure that was not reported is said to
be missing, never printed as a placeholder. A run that did not succeed ends
with the failure line instead: what happened to its pods, then each rank's
own words.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _loss_words(status):
    """"loss 5.5488 -> 3.0886 over 30 steps", from one pod's status."""
    status = status if isinstance(status, dict) else {}
    first, latest = _number(status.get("first_loss")), _number(status.get("latest_loss"))
    if first is None or latest is None:
        return "loss not reported in the log of rank 0's pod"
    step = _number((status.get("metrics") or {}).get("step"))
    return "loss %.4f -> %.4f%s" % (first, latest, (" over %d steps" % step) if step is not None else "")


def _baseline_words(run, baseline):
    entry = (baseline or {}).get(run.get("metric"))
    if not isinstance(entry, dict) or _number(entry.get("value")) is None:
        return ""
    if entry.get("source") == "runs" and (_number(entry.get("of_runs")) or 0) <= 1:
        # The median of one run is that run: compared with itself, it could
        # not have been slower. Only a fall within the run was looked for.
        return " within the run; no other run to compare it with (train_baseline)"
    return " (baseline %.1f %s)" % (entry["value"], entry.get("unit", ""))


def summary_line(run_id, pods, nproc_per_pod, run, statuses, baseline, logs_dir):
    """The run's closing line.

    run_id: the run's id; pods: its pod names, rank 0's first;
    nproc_per_pod: processes per pod; run: throughput_report's entry for
    rank 0's log; statuses: each pod's status (first_loss, latest_loss,
    metrics.step), rank 0's first; baseline: throughput_report's baseline
    mapping; logs_dir: where the logs and summary.json were written.
    """
    words = ["run %s succeeded on %d pod(s) x %s process(es): " % (run_id, len(pods), nproc_per_pod)]
    throughput = _number(run.get("throughput"))
    # The figure is rank 0's log's steady-state median: said, since the
    # pods' own figures may differ.
    words.append("%.1f %s (rank 0's median)" % (throughput, run.get("unit", "")) if throughput is not None
                 else "throughput not reported" + (" (%s)" % run["not_reported"] if run.get("not_reported") else ""))
    mfu = _number(run.get("mfu"))
    if mfu is not None:
        words.append(", MFU %.1f%%" % (mfu * 100))
    first = next((status for status in statuses if isinstance(status, dict)), None)
    words.append("; %s; " % _loss_words(first))
    if throughput is None:
        # Nothing measured, nothing judged: never "not degraded".
        words.append("degradation not judged")
    else:
        words.append(("DEGRADED: " + "; ".join(run.get("reasons") or [])) if run.get("degraded") else "not degraded")
    words.append(_baseline_words(run, baseline))
    words.append("; logs and summary: %s/" % logs_dir.rstrip("/"))
    return "".join(words)


# -- a run that did not succeed ----------------------------------------------


def _containers(pod):
    return (pod.get("status") or {}).get("containerStatuses") or []


def _restarts(pod):
    return sum(_number(container.get("restartCount")) or 0 for container in _containers(pod))


def _last_ending(pod):
    """How the last container that restarted ended: "OOMKilled, exit
    status 137"; "" when no container says."""
    for container in _containers(pod):
        ended = (container.get("lastState") or {}).get("terminated") or {}
        if ended:
            parts = [ended.get("reason") or "", "exit status %s" % ended["exitCode"] if "exitCode" in ended else ""]
            return ", ".join(part for part in parts if part)
    return ""


def _node_trouble(name, nodes):
    """Why node ``name`` cannot run a pod, by its object now; "" when it is
    Ready. ``nodes``: node objects by name."""
    node = nodes.get(name)
    if node is None:
        return "node %s is gone from the cluster" % name
    ready = [condition for condition in (node.get("status") or {}).get("conditions") or []
             if condition.get("type") == "Ready"]
    if ready and ready[0].get("status") == "True":
        return ""
    condition = ready[0] if ready else {}
    why = condition.get("reason") or condition.get("message") or "no Ready condition"
    since = condition.get("lastTransitionTime")
    return "node %s is not Ready (%s%s)" % (name, why, ", since %s" % since if since else "")


def pod_fates(pods_then, pods_now, nodes):
    """What happened to a run's pods while it ran, as the cluster shows it:
    ``{pod name: words}`` for each pod of ``pods_then`` (the pod objects when
    the run started) that is gone, being deleted, replaced by a new pod (a
    deploy, a scale, an eviction, a delete by hand), whose container
    restarted (an OOM kill, a crash of the container's own process), or
    whose node is not Ready or gone. ``pods_now``: the pod objects now;
    ``nodes``: the node objects now (None when they could not be read:
    nothing is said of the nodes then, rather than that all are gone). A
    pod with nothing to say is left out: its run failed on its own (the
    ranks' logs say why)."""
    now = dict((pod["metadata"]["name"], pod) for pod in pods_now or [])
    nodes = None if nodes is None else dict((node["metadata"]["name"], node) for node in nodes)
    fates = {}
    for then in pods_then or []:
        name, node = then["metadata"]["name"], (then.get("spec") or {}).get("nodeName") or ""
        words = []
        current = now.get(name)
        if current is None:
            words.append("pod %s was deleted while the run ran and is not back" % name)
        elif current["metadata"].get("uid") != then["metadata"].get("uid"):
            words.append("pod %s was replaced while the run ran (deleted, evicted, or recreated by a deploy or scale; "
                         "the new one is on node %s)" % (name, (current.get("spec") or {}).get("nodeName") or "none yet"))
        elif current["metadata"].get("deletionTimestamp"):
            words.append("pod %s is being deleted (since %s)" % (name, current["metadata"]["deletionTimestamp"]))
        elif _restarts(current) > _restarts(then):
            ending = _last_ending(current)
            words.append("a container of pod %s restarted while the run ran%s" % (
                name, " (it ended: %s)" % ending if ending else ""))
        trouble = _node_trouble(node, nodes) if node and nodes is not None else ""
        if trouble:
            words.append(trouble)
        if words:
            fates[name] = "; ".join(words)
    return fates


# The workers' own last lines (torchrun prefixes them with [rankN]:) say
# why a rank failed; torchrun's closing summary after them only says who.
_WORKER_LINE = re.compile(r"^\[rank([0-9]+)\]:")


def _ranks(lines):
    """" (rank 1)", " (ranks 8-15)": the global ranks whose lines a pod's log
    holds (with c10d rendezvous a pod's ranks are known only from them);
    empty when it holds none."""
    ranks = sorted({int(match.group(1)) for match in map(_WORKER_LINE.match, lines) if match})
    if not ranks:
        return ""
    spans, start = [], ranks[0]
    for previous, current in zip(ranks, ranks[1:] + [None]):
        if current != previous + 1:
            spans.append(str(start) if start == previous else "%d-%d" % (start, previous))
            start = current
    return " (rank%s %s)" % ("s" if len(ranks) > 1 else "", ", ".join(spans))


def _pod_words(entry, lines=()):
    """"h-kim-1 (rank 1) failed (exit status 1): why" for a pod whose run did
    not succeed, from its status exec (pods_exec's entry) and its log's
    lines; None for one that did."""
    status = entry.get("json")
    if not isinstance(status, dict):
        why = entry.get("error") or (entry.get("stderr") or "").strip() or "no answer"
        return "%s gave no status (%s)" % (entry.get("pod"), why[-300:])
    if status.get("state") == "succeeded":
        return None
    if status.get("state") == "running":
        # Its ranks were stopped after another pod's failed: an echo.
        return "%s was still running and was stopped" % entry.get("pod")
    words = "%s%s %s (exit status %s)" % (entry.get("pod"), _ranks(list(lines) or status.get("log_tail") or []),
                                          status.get("state"), status.get("exit_code"))
    return words + (": %s" % status["error"] if status.get("error") else "")


def failure_line(run_id, state, statuses, pod_logs, logs_dir, note="", fates=None):
    """The message a run that did not succeed fails its play with: the end
    ``note`` of its start mode (a timeout, its object deleted), what happened
    to its pods (``pod_fates``), each pod that did not succeed with its
    state, exit status and error (a pod that gave no status too), the last
    lines of each such pod's workers, and where the logs went.

    statuses: each pod's status exec ({pod, json} or the exec's error);
    pod_logs: {pod, stdout} per pod."""
    words = ["run %s %s:" % (run_id, state)]
    if note:
        words.append(note.strip())
    words.extend("%s;" % fate for fate in (fates or {}).values())
    logs = dict((entry.get("pod"), entry.get("stdout") or "") for entry in pod_logs or [])
    described = [(entry, _pod_words(entry, logs.get(entry.get("pod"), "").splitlines()))
                 for entry in statuses or []]
    unsucceeded = [entry for entry, said in described if said]
    words.extend("%s;" % said for _entry, said in described if said)
    for entry in unsucceeded:
        if isinstance(entry.get("json"), dict) and entry["json"].get("state") == "running":
            continue
        workers = [line for line in logs.get(entry.get("pod"), "").splitlines() if _WORKER_LINE.match(line)]
        status = entry.get("json") if isinstance(entry.get("json"), dict) else {}
        lines = workers[-6:] or (status.get("log_tail") or [])[-8:]
        if lines:
            words.append("last lines of %s: %s;" % (entry.get("pod"), " | ".join(lines)))
    words.append("logs: %s/" % logs_dir.rstrip("/"))
    return " ".join(words)


# -- what -e stop=true did ----------------------------------------------------

def stop_line(pods):
    """What stopping the current run in each pod did: pods is pods_exec's
    entries of ``mlinfra train stop`` (pod, json). A pod whose run had
    already ended, or that never ran one, had nothing to stop: the line
    says so rather than list the ended run's state as if it was stopped."""
    stopped, ended, idle, silent = [], [], [], []
    for item in pods:
        answer = item.get("json") if isinstance(item.get("json"), dict) else None
        if answer is None:
            silent.append(item.get("pod"))
        elif answer.get("stopped"):
            left = ", ".join(str(pid) for pid in answer.get("left") or [])
            stopped.append("%s (run %s%s)" % (item.get("pod"), answer.get("run_id"),
                                              "; left running: " + left if left else ""))
        elif answer.get("state") == "not-started" or not answer.get("run_id"):
            idle.append(item.get("pod"))
        else:
            ended.append("%s (run %s had %s)" % (item.get("pod"), answer.get("run_id"), answer.get("state")))
    parts = []
    if stopped:
        parts.append("stopped the run in " + ", ".join(stopped))
    if not stopped:
        parts.append("nothing to stop: no run was going")
    if ended:
        parts.append("already ended in " + ", ".join(ended))
    if idle:
        parts.append("no run started in " + ", ".join(idle))
    if silent:
        parts.append("no answer from " + ", ".join(silent))
    return "; ".join(parts)
