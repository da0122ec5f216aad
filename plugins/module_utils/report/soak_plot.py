# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""A soak report (soak.json, verdicts.soak_report) as a chart: each run's
figure by its number, the baseline and the level below which a run is
degraded as dashed steps, the degraded runs ringed in red. Runs that were
not measured have no point; the subtitle counts them. Standard library only
(png_chart).
"""

from __future__ import absolute_import, division, print_function

from .png_chart import GREEN, GREY, PALETTE, RED, TEXT, LineChart

__metaclass__ = type

DEFAULT_TITLE = "soak: each run's figure"
BASELINE_LABEL = "baseline"
DEGRADED_LABEL = "degraded below"
DEGRADED_RUNS_LABEL = "degraded runs"


def is_soak_report(found):
    """Whether a parsed JSON document is a soak report (not a benchmark's)."""
    return isinstance(found, dict) and isinstance(found.get("runs"), list) and "degraded" in found \
        and "not_measured" in found


def _subtitle(report):
    runs, degraded, unmeasured = len(report["runs"]), report.get("degraded") or [], report.get("not_measured") or []
    bad = bool(degraded or unmeasured)
    verdict = "%d degraded, %d not measured" % (len(degraded), len(unmeasured)) if bad else "none degraded"
    tail = " - %d runs of the %s on %s" % (runs, "benchmark" if report.get("workload") == "bench" else "training",
                                           report.get("cluster"))
    if report.get("not_checked_words"):
        tail += "; %s" % report["not_checked_words"]
    return [("soak: ", TEXT), (verdict, RED if bad else GREEN), (tail, TEXT)]


def soak_chart(report, width, height, title=None, source="the report"):
    """The LineChart of a soak report. Raises ValueError when no run was
    measured."""
    measured = [run for run in report["runs"] if isinstance(run, dict) and run.get("throughput") is not None]
    if not measured:
        raise ValueError("%s has no measured run to plot: every run failed or gave no figure" % source)
    unit = measured[0].get("unit") or ""
    chart = LineChart(width, height, title=title or DEFAULT_TITLE, subtitle=_subtitle(report), counting=True,
                      x_label="run", y_label=unit)
    first, last = min(run["run"] for run in report["runs"]), max(run["run"] for run in report["runs"])
    baseline = (report.get("baseline") or {}).get("value")
    if baseline:
        # A level at every run, from the first run to half a run past the last.
        numbers = range(first, last + 1)
        chart.step(BASELINE_LABEL, [(number, baseline) for number in numbers], GREY)
        if report.get("threshold"):
            level = baseline * (1 - float(report["threshold"]))
            chart.step(DEGRADED_LABEL, [(number, level) for number in numbers], RED, dash=(3, 4))
    degraded = [(run["run"], run["throughput"]) for run in measured if run.get("degraded")]
    if degraded:
        chart.markers(DEGRADED_RUNS_LABEL, degraded, RED)
    chart.line(unit or "figure", [(run["run"], run["throughput"]) for run in measured], PALETTE[0])
    return chart
