# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""The line a successful training run ends with, in every start mode: where
it ran, its throughput (and MFU where the log gives it), how the loss moved,
whether it is degraded against its baseline, and where its logs went.

The loss comes from the run's first pod (node rank 0, whose log the
throughput is read from), as ``mlinfra-train status`` or the Job modes'
reading of a pod's log report it; a figure that was not reported is said to
be missing, never printed as a placeholder.

Standard library only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


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
    words.append("%.1f %s" % (throughput, run.get("unit", "")) if throughput is not None
                 else "throughput not reported")
    mfu = _number(run.get("mfu"))
    if mfu is not None:
        words.append(", MFU %.1f%%" % (mfu * 100))
    first = next((status for status in statuses if isinstance(status, dict)), None)
    words.append("; %s; " % _loss_words(first))
    words.append(("DEGRADED: " + "; ".join(run.get("reasons") or [])) if run.get("degraded") else "not degraded")
    words.append(_baseline_words(run, baseline))
    words.append("; logs and summary: %s/" % logs_dir.rstrip("/"))
    return "".join(words)
