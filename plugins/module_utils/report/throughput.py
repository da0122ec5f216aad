# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""Training throughput from logs, and which runs are degraded.

Each run's steady-state throughput (its log read by throughput_logs: one
parser per format) is the median of its measurements after the warm-up
steps. A run is degraded when its throughput
is more than ``threshold`` below the reference of its metric (the robust
centre of the runs, or a saved baseline), or when it drops by more than that
partway through and stays down.

Standard library only: shared by the ``throughput_report`` module and the
command ``mlinfra throughput-report``, which runs in pods and on laptops
without Ansible.
"""

from __future__ import absolute_import, division, print_function

import argparse
import glob
import json
import math
import os
import re
import sys
import time

from ..common.stats import median
from ..common.files import write_atomically
from .throughput_logs import FORMATS, NUMBER_PATTERN, PER_DEVICE, WHOLE_JOB, ThroughputError, parse_log, parse_number
from .degradation import CANNOT_TELL, NOISE_SIGMAS, FactsError, attribute, facts_path, is_facts_file, read_facts

__metaclass__ = type


# The two normal runs of the real Composer logs (tests/fixtures/logs) differ
# by 0.04% in tokens/s and the two degraded ones are 34.1% and 34.3% below
# them: 15% is less than half that drop and leaves room for noise hundreds
# of times larger than the normal runs showed (and twice the 7% of the
# noisier real DeepSpeed runs there; the real TorchTitan ones lie within 3.4%).
DEFAULT_THRESHOLD = 0.15

# TorchTitan logs step 1 (compilation, allocator growth, NCCL communicator
# set-up) and then every 10 steps by default; DeepSpeed prints every 10 steps
# by default; Composer reports throughput only once its speed-monitor window
# is full (batch 11 in the real logs). Dropping what is logged at steps 1-10
# removes the warm-up and keeps Composer's first figure.
DEFAULT_WARMUP_STEPS = 10

# Fewest measurements on each side of a split before a fall in throughput
# partway through a run is believed.
MIN_SEGMENT = 3
# ... and the fall must last at least this share of the run's measurements
# after the warm-up. Real normal TorchTitan and DeepSpeed runs of a small
# model on one GPU had dips of 20-30% lasting up to a sixth of the run that
# then recovered; the degradation this looks for stays until the run ends.
MIN_DROP_SHARE = 0.25
MAX_DROP_POINTS = 200

# A normal run's scatter is taken as 1.4826 * MAD (the standard deviation of
# normally distributed noise); a threshold within 3 of those may flag noise.
MAD_TO_SIGMA = 1.4826

BASELINE_KIND = "mlinfra.multinode.throughput_baseline"
BASELINE_VERSION = 1

# The figure compared across runs, per format, in order of preference:
# per device where the log gives one, so that runs on different numbers of
# devices compare; else the whole job's, which becomes per device where the
# number of devices is known (the log's own, or the devices option).
METRICS = {
    "torchtitan": ("tokens_per_sec_per_device",),
    "composer": ("tokens_per_sec_per_device", "samples_per_sec_per_device", "batches_per_sec_per_device",
                 "tokens_per_sec", "samples_per_sec", "batches_per_sec"),
    "deepspeed": ("samples_per_sec",),
    # --log-throughput's TFLOP/s per GPU; else the job's samples per second.
    "megatron": ("tflops_per_device", "samples_per_sec"),
    "benchmark": ("busbw",),
}
UNITS = {
    "tokens_per_sec_per_device": "tokens/s per device",
    "samples_per_sec_per_device": "samples/s per device",
    "batches_per_sec_per_device": "batches/s per device",
    "tokens_per_sec": "tokens/s",
    "samples_per_sec": "samples/s",
    "batches_per_sec": "batches/s",
    "tflops_per_device": "TFLOP/s per device",
    "busbw": "GB/s",
}


def quantile(values, fraction):
    """The value below which lies the given fraction of values (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(math.ceil(fraction * len(ordered))) - 1))]


def noise(runs):
    """How far the degraded runs (``runs``: each with ``degraded`` and
    ``throughput``) fall below the normal ones against the normal runs'
    scatter: {shortfall, scatter (1.4826 MAD), within: the shortfall is
    within NOISE_SIGMAS of it}; None where fewer than two normal runs or
    no degraded run give a throughput."""
    normal = [run["throughput"] for run in runs if not run["degraded"] and run.get("throughput")]
    degraded = [run["throughput"] for run in runs if run["degraded"] and run.get("throughput")]
    spread = relative_mad(normal)
    if spread is None or not degraded:
        return None
    scatter, shortfall = MAD_TO_SIGMA * spread, 1.0 - median(degraded) / median(normal)
    return {"shortfall": round(shortfall, 4), "scatter": round(scatter, 4),
            "within": shortfall <= NOISE_SIGMAS * scatter}


def relative_mad(values):
    """Median absolute deviation over the median: the scatter of values,
    which one outlier does not inflate. None for fewer than two values."""
    centre = median(values)
    if len(values) < 2 or not centre:
        return None
    return median([abs(value - centre) for value in values]) / abs(centre)


def _metric_of(fmt, measurements):
    for metric in METRICS[fmt]:
        if any(metric in m["figures"] for m in measurements):
            return metric
    return None


def find_drop(steps, values, threshold, min_segment=MIN_SEGMENT, min_share=MIN_DROP_SHARE):
    """Where throughput falls by more than threshold and stays down: of the
    splits whose later part's median is that far below the earlier part's
    (each part at least min_segment measurements, the later one at least
    min_share of them all, most of each on its side), the one that fits the
    measurements best (least absolute deviation from the two medians). One
    slow step, a checkpoint say, moves no median. None when no split falls
    that far."""
    if len(values) > MAX_DROP_POINTS:
        # Long runs: medians of consecutive blocks keep the search quadratic
        # in a few hundred points at most.
        size = int(math.ceil(len(values) / float(MAX_DROP_POINTS)))
        steps = [steps[index] for index in range(0, len(values), size)]
        values = [median(values[index:index + size]) for index in range(0, len(values), size)]
    best = None
    last_split = len(values) - max(min_segment, int(math.ceil(min_share * len(values))))
    for split in range(min_segment, last_split + 1):
        head, tail = values[:split], values[split:]
        before, after = median(head), median(tail)
        if before <= 0 or after >= (1.0 - threshold) * before:
            continue
        # Most measurements on each side must agree: three quarters of
        # those after the split well below the level before it, and three
        # quarters of those before well above the level after. Steps that
        # alternate between fast and slow have medians apart but are no fall.
        margin = 1.0 - threshold / 2.0
        if quantile(tail, 0.75) >= margin * before or quantile(head, 0.25) * margin <= after:
            continue
        cost = sum(abs(value - before) for value in head) + sum(abs(value - after) for value in tail)
        if best is None or cost < best[0]:
            best = (cost, split, before, after)
    if best is None:
        return None
    split, before, after = best[1:]
    return {"step": steps[split], "before": before, "after": after, "fraction": 1.0 - after / before}


def run_devices(parsed, given):
    """The number of devices of a run and where it comes from: the log's
    own, else ``given`` (the devices option), else unknown (None)."""
    found = parsed.get("devices")
    if found:
        warnings = [] if not given or given == found else [
            "its log says %d devices ran it; that is used, not devices=%d" % (found, given)]
        return found, "log", warnings
    if given:
        return given, "given", []
    return None, None, []


def summarize_run(path, parsed, warmup_steps=DEFAULT_WARMUP_STEPS, threshold=DEFAULT_THRESHOLD, devices=None):
    """One run's steady-state figures from its parsed log; a whole job's
    figure is divided by the run's number of devices where it is known."""
    stat = os.stat(path)
    count, source, warnings = run_devices(parsed, devices)
    run = {
        "path": path, "format": parsed["format"], "mtime": stat.st_mtime,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stat.st_mtime)),
        "warnings": warnings, "drop": None, "degraded": False, "reasons": [],
        "devices": count, "devices_from": source,
    }
    if parsed["format"] == "benchmark":
        values = parsed["values"]
        run.update({
            "metric": "busbw", "unit": UNITS["busbw"], "throughput": parsed["figures"]["busbw"],
            "figures": parsed["figures"], "mfu": None, "measurements": parsed["results"], "samples": len(values),
            "first_step": None, "last_step": None, "steady_from_step": None, "spread": relative_mad(values),
            "notes": ["busbw at the largest size, %d bytes" % parsed["figures"]["size"]] + [
                "%s: %s" % item for item in sorted(parsed["info"].items())],
        })
        return run
    measurements = parsed["measurements"]
    metric = _metric_of(parsed["format"], measurements)
    if metric is None:
        raise ThroughputError("%s has %s lines but none with %s" % (
            path, parsed["format"], " or ".join(METRICS[parsed["format"]])))
    with_metric = [m for m in measurements if m["figures"].get(metric) is not None and m["figures"][metric] > 0]
    if not with_metric:
        raise ThroughputError("%s: every %s figure in its %s lines is 0 or less" % (path, metric, parsed["format"]))
    steady = [m for m in with_metric if m["step"] > warmup_steps]
    if not steady:
        steady = with_metric[-1:]
        run["warnings"].append("all %d measurements are within the first %d (warm-up) steps; the last one, at "
                               "step %d, is used" % (len(with_metric), warmup_steps, steady[0]["step"]))
    values = [m["figures"][metric] for m in steady]
    if metric in WHOLE_JOB and count:
        values = [value / count for value in values]
        metric += PER_DEVICE
    names = sorted(set(key for m in steady for key in m["figures"]))
    figures = dict((key, median([m["figures"][key] for m in steady if key in m["figures"]])) for key in names)
    figures[metric] = median(values)
    run.update({
        "metric": metric, "unit": UNITS[metric], "throughput": median(values), "figures": figures,
        "mfu": figures.get("mfu"), "measurements": len(measurements), "samples": len(values),
        "first_step": measurements[0]["step"], "last_step": measurements[-1]["step"],
        "steady_from_step": steady[0]["step"], "spread": relative_mad(values), "notes": list(parsed["notes"]),
    })
    if parsed["annotations"]:
        run["notes"].append("%d line(s) starting with '#' ignored as annotations" % parsed["annotations"])
    drop = find_drop([m["step"] for m in steady], values, threshold)
    if drop:
        run["drop"] = drop
    return run


def robust_reference(values, threshold):
    """The reference throughput of runs of one metric: their median, taken
    again over the runs not more than threshold below it until none more is
    set aside. A plain median moves once half the runs are degraded (30-40%
    were, where the real Composer logs come from, and those are two normal
    and two degraded runs); this one holds until more than half are. Returns (reference, the
    indices of the runs it rests on)."""
    centre = median(values)
    while True:
        kept = [index for index, value in enumerate(values) if value >= (1.0 - threshold) * centre]
        new_centre = median([values[index] for index in kept])
        if new_centre == centre:
            return centre, kept
        centre = new_centre


def _whole_job_warnings(runs):
    """What comparing whole-job figures of an unknown number of devices
    cannot tell: runs on more devices are faster without being better."""
    whole = [run for run in runs if run["metric"] in WHOLE_JOB]
    if not whole or len(runs) < 2:
        return []
    paths = ", ".join(run["path"] for run in whole)
    if len(whole) < len(runs):
        return ["%s: the whole job's %s and no number of devices in the log, so not compared with the runs "
                "measured per device; give devices (the job's number of GPUs) to compare them"
                % (paths, " and ".join(sorted(set(UNITS[run["metric"]] for run in whole))))]
    return ["%s: whole-job figures, and the logs do not say how many devices ran them: compared as they are, "
            "which holds only for runs on the same number of devices; give devices to compare per device" % paths]


def judge_runs(runs, threshold=DEFAULT_THRESHOLD, given=None):
    """Set each run's degraded flag and reasons; return the baseline used
    per metric. given: {metric: {"value": ..., "source": ...}} from a saved
    baseline or a number."""
    given = given or {}
    baselines, warnings = {}, []
    metrics = []
    for run in runs:
        if run["metric"] not in metrics:
            metrics.append(run["metric"])
    if len(metrics) > 1:
        warnings.append("runs of %d different metrics (%s) are each compared only with runs of their own metric"
                        % (len(metrics), ", ".join(metrics)))
    warnings.extend(_whole_job_warnings(runs))
    for metric in metrics:
        group = [run for run in runs if run["metric"] == metric]
        values = [run["throughput"] for run in group]
        if metric in given:
            baseline = dict(given[metric], of_runs=len(group))
        else:
            reference, kept = robust_reference(values, threshold)
            spread = relative_mad([values[index] for index in kept])
            baseline = {"value": reference, "unit": UNITS.get(metric), "source": "runs",
                        "runs": len(kept), "of_runs": len(group), "spread": spread}
            if len(group) == 1:
                warnings.append("%s is the only %s run and no baseline was given: it is compared with itself "
                                "only; give a baseline to judge it" % (group[0]["path"], metric))
            elif spread is not None and NOISE_SIGMAS * MAD_TO_SIGMA * spread > threshold:
                warnings.append("the normal %s runs scatter by %.1f%% (1.4826 MAD), so a threshold of %.0f%% may "
                                "flag noise: raise threshold" % (metric, 100 * MAD_TO_SIGMA * spread, 100 * threshold))
            faster = [run["path"] for run in group if reference < (1.0 - threshold) * run["throughput"]]
            if faster:
                # The reference would itself be degraded next to these: either
                # they are unusually fast, or most runs are degraded, which
                # the runs alone cannot tell apart.
                warnings.append("%s: more than %.0f%% faster than the reference of the %s runs; if those are the "
                                "normal ones, most runs are degraded: compare with a saved baseline"
                                % (", ".join(faster), 100 * threshold, metric))
        baselines[metric] = baseline
        for run in group:
            below = 1.0 - run["throughput"] / baseline["value"]
            run["baseline"] = baseline["value"]
            run["below_baseline"] = below
            if below > threshold:
                run["reasons"].append("%.1f%% below the baseline %.6g %s (threshold %.0f%%)" % (
                    100 * below, baseline["value"], run["unit"], 100 * threshold))
            if run["drop"]:
                run["reasons"].append("fell %.1f%% from step %d on (%.6g to %.6g %s)" % (
                    100 * run["drop"]["fraction"], run["drop"]["step"], run["drop"]["before"], run["drop"]["after"],
                    run["unit"]))
            run["degraded"] = bool(run["reasons"])
    return baselines, warnings


def load_baseline(value, metrics):
    """A baseline given as a number (for runs of one metric) or as the path
    of a file written by save_baseline: {metric: {"value", "source", ...}}."""
    if value is None or value == "":
        return {}
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is None and isinstance(value, str):
        number = parse_number(value) if re.match(r"^\s*" + NUMBER_PATTERN + r"\s*$", value) else None
    if number is not None:
        if number <= 0:
            raise ThroughputError("baseline must be a throughput above 0, got %s" % value)
        if len(metrics) != 1:
            raise ThroughputError("a numeric baseline is for runs of one metric; these runs have %s: give a "
                                  "baseline file written by save_baseline instead" % ", ".join(metrics))
        return {metrics[0]: {"value": float(number), "unit": UNITS.get(metrics[0]), "source": "given",
                             "runs": None, "spread": None}}
    if not isinstance(value, str):
        raise ThroughputError("baseline must be a number or the path of a baseline file, got %r" % (value,))
    path = os.path.expanduser(value)
    try:
        with open(path) as handle:
            document = json.load(handle)
    except (IOError, OSError) as exc:
        raise ThroughputError("cannot read the baseline file %s: %s (write one with save_baseline, or give a "
                              "number)" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise ThroughputError("baseline file %s is not JSON (%s): write it with save_baseline" % (path, exc))
    saved = document.get("baselines") if isinstance(document, dict) else None
    if not isinstance(saved, dict) or document.get("kind") != BASELINE_KIND:
        raise ThroughputError("%s is not a baseline file written by save_baseline (no kind %s with baselines)"
                              % (path, BASELINE_KIND))
    given = {}
    for metric in metrics:
        entry = saved.get(metric)
        value = entry.get("value") if isinstance(entry, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ThroughputError("baseline file %s has no baseline for %s (it has: %s): save one from runs of "
                                  "that metric" % (path, metric, ", ".join(sorted(saved)) or "none"))
        spread = entry.get("spread")
        given[metric] = {"value": float(value), "unit": UNITS.get(metric), "source": os.path.abspath(path),
                         "runs": len(entry["runs"]) if isinstance(entry.get("runs"), list) else None,
                         "spread": spread if isinstance(spread, (int, float)) and not isinstance(spread, bool)
                         else None}
    return given


def baseline_document(runs, baselines):
    """What save_baseline writes: per metric, the median throughput of this
    call's runs that are not degraded, and those runs."""
    saved = {}
    for metric in baselines:
        normal = [run for run in runs if run["metric"] == metric and not run["degraded"]]
        if not normal:
            raise ThroughputError("every %s run is degraded: nothing normal to save as a baseline; save one from "
                                  "runs known to be normal" % metric)
        values = [run["throughput"] for run in normal]
        saved[metric] = {
            "value": median(values), "unit": UNITS.get(metric), "spread": relative_mad(values),
            "runs": [{"path": run["path"], "format": run["format"], "throughput": run["throughput"],
                      "time": run["time"]} for run in normal],
        }
    return {"kind": BASELINE_KIND, "version": BASELINE_VERSION, "baselines": saved}


def render_baseline(document):
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _relative_to(path):
    if os.path.isabs(path):
        return ""
    return " (relative to %s, where this runs; an absolute path avoids that)" % os.getcwd()


def expand_logs(patterns):
    """Every file the paths and globs name, in the order given, each once."""
    if not patterns:
        raise ThroughputError("logs is empty: give at least one log path or glob, for example runs/*.log")
    paths = []
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            raise ThroughputError("logs must be paths or globs, got %r" % (pattern,))
        expanded = os.path.expanduser(pattern)
        if glob.has_magic(expanded):
            matches = sorted(glob.glob(expanded))
            # A run's facts beside its log (degradation) are not a log.
            files = [match for match in matches if os.path.isfile(match) and not is_facts_file(match)]
            if not files:
                raise ThroughputError("%s matches no %s%s: check the pattern" % (
                    pattern, "file, only directories" if matches else "file", _relative_to(expanded)))
        elif os.path.isdir(expanded):
            raise ThroughputError("%s is a directory: give the log files, for example %s" % (
                pattern, os.path.join(pattern, "*.log")))
        elif not os.path.isfile(expanded):
            raise ThroughputError("%s does not exist%s: check the path" % (pattern, _relative_to(expanded)))
        else:
            files = [expanded]
        for path in files:
            path = os.path.abspath(path)
            if path not in paths:
                paths.append(path)
    return paths


def throughput_report(logs, fmt="auto", warmup_steps=DEFAULT_WARMUP_STEPS, threshold=DEFAULT_THRESHOLD,
                      baseline=None, save_baseline=None, devices=None):
    """Everything the module and the command return, except whether the
    baseline file was written: the caller writes ``baseline_text`` (when
    asked for) after deciding to. ``devices``: how many devices ran each
    run whose log does not say. Raises ThroughputError before anything is
    written."""
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int) or devices < 1):
        raise ThroughputError("devices is the number of GPUs each run used, 1 or more, got %r" % (devices,))
    if not 0 < threshold < 1:
        raise ThroughputError("threshold is a fraction between 0 and 1 (0.15 = 15%% below), got %s" % threshold)
    if warmup_steps < 0:
        raise ThroughputError("warmup_steps must be 0 or more, got %d" % warmup_steps)
    if save_baseline and os.path.isdir(save_baseline):
        raise ThroughputError("save_baseline %s is a directory: give a file path, for example %s" % (
            save_baseline, os.path.join(save_baseline, "baseline.json")))
    if save_baseline:
        directory = os.path.dirname(os.path.abspath(save_baseline))
        if not os.path.isdir(directory):
            raise ThroughputError("the directory of save_baseline %s does not exist: create it first" % save_baseline)
        if not os.access(directory, os.W_OK):
            raise ThroughputError("cannot write save_baseline %s: %s is not writable" % (save_baseline, directory))
    runs = [summarize_run(path, parse_log(path, fmt), warmup_steps, threshold, devices) for path in expand_logs(logs)]
    metrics = []
    for run in runs:
        if run["metric"] not in metrics:
            metrics.append(run["metric"])
    given = load_baseline(baseline, metrics)
    baselines, warnings = judge_runs(runs, threshold, given)
    report = {
        "runs": runs,
        "baseline": baselines,
        "degraded": [run["path"] for run in runs if run["degraded"]],
        "threshold": threshold,
        "warmup_steps": warmup_steps,
        "warnings": warnings + ["%s: %s" % (run["path"], warning) for run in runs for warning in run["warnings"]],
        "baseline_text": None,
        "attribution": attribute_runs(runs),
    }
    if save_baseline:
        report["baseline_text"] = render_baseline(baseline_document(runs, baselines))
    return report


def attribute_runs(runs):
    """What separates the degraded runs from the normal ones (degradation),
    from the facts beside their logs; None when no run has any. A run is
    numbered as its facts say, else by its place among the logs."""
    numbered = []
    for index, run in enumerate(runs):
        try:
            facts = read_facts(facts_path(run["path"]))
        except FactsError as exc:
            raise ThroughputError(str(exc))
        numbered.append({"run": (facts or {}).get("run") or index + 1, "degraded": run["degraded"], "facts": facts,
                         "path": run["path"], "throughput": run.get("throughput")})
    if not any(run["facts"] for run in numbered):
        return None
    return attribute(numbered, noise([run for run in numbered if run["facts"] and run["degraded"] is not None]))


def baseline_file_state(path, text):
    """(whether writing text to path would change it, its current text)."""
    try:
        with open(path) as handle:
            current = handle.read()
    except (IOError, OSError):
        return True, ""
    return current != text, current


def _percent(fraction):
    if fraction is None:
        return ""
    # Above the baseline is +, below it -; what rounds to 0.0 has no sign.
    change = -100 * fraction
    return "%+.1f%%" % (change if abs(change) >= 0.05 else 0.0)


def format_report(report):
    """A short table: one line per run, then the baselines and warnings."""
    rows = [("run", "format", "throughput", "unit", "vs base", "mfu", "steps", "verdict")]
    for run in report["runs"]:
        steps = "-" if run["last_step"] is None else "%s-%s" % (run["steady_from_step"], run["last_step"])
        rows.append((os.path.basename(run["path"]), run["format"], "%.6g" % run["throughput"], run["unit"],
                     _percent(run.get("below_baseline")), "" if run["mfu"] is None else "%.3f" % run["mfu"], steps,
                     "DEGRADED: " + "; ".join(run["reasons"]) if run["degraded"] else "ok"))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in rows]
    for metric, baseline in sorted(report["baseline"].items()):
        if baseline["source"] == "runs":
            origin = "robust median of %d of %d runs" % (baseline["runs"], baseline["of_runs"])
        else:
            origin = "given" if baseline["source"] == "given" else "from %s" % baseline["source"]
        lines.append("baseline %s: %.6g %s (%s); degraded when more than %.0f%% below" % (
            metric, baseline["value"], baseline["unit"], origin, 100 * report["threshold"]))
    lines.append("%d run(s), %d degraded" % (len(report["runs"]), len(report["degraded"])))
    lines.extend("warning: %s" % warning for warning in report["warnings"])
    attribution = report.get("attribution")
    if attribution:
        lines.append("attribution: %s" % attribution["summary"])
        if attribution["factors"] and attribution["verdict"] == CANNOT_TELL:
            lines.append("  candidates, not named (within the runs' scatter):")
        for factor in attribution["factors"]:
            lines.append("  %s: in %s and %s%s" % (factor["factor"], factor["in_degraded"], factor["in_normal"],
                                                   "".join("\n    %s" % line for line in factor["evidence"])))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="mlinfra throughput-report",
        description="Throughput of training runs from their logs (TorchTitan, Composer, DeepSpeed, Megatron-LM, "
                    "the benchmark's JSON), and which runs are degraded. Exit status 1 when one is, 2 on bad input.")
    parser.add_argument("logs", nargs="*", help="log files or globs (quote globs)")
    parser.add_argument("--format", choices=FORMATS, default="auto", dest="fmt")
    parser.add_argument("--warmup-steps", type=int, default=DEFAULT_WARMUP_STEPS,
                        help="measurements logged at these first steps are warm-up (default %(default)s)")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                        help="fraction below the baseline that is degraded (default %(default)s)")
    parser.add_argument("--baseline", help="a throughput, or a baseline file written by --save-baseline")
    parser.add_argument("--save-baseline", metavar="PATH", help="write the normal runs' throughput here")
    parser.add_argument("--devices", type=int, help="how many GPUs ran each run whose log does not say, to compare "
                                                    "whole-job figures per device")
    parser.add_argument("--output", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        report = throughput_report(args.logs, fmt=args.fmt, warmup_steps=args.warmup_steps,
                                   threshold=args.threshold, baseline=args.baseline,
                                   save_baseline=args.save_baseline, devices=args.devices)
    except ThroughputError as exc:
        sys.stderr.write("mlinfra throughput-report: %s\n" % exc)
        return 2
    text = report.pop("baseline_text")
    report["changed"] = False
    if args.save_baseline:
        report["changed"] = baseline_file_state(args.save_baseline, text)[0]
        if report["changed"]:
            write_atomically(args.save_baseline, text)
    if args.output == "json":
        json.dump(report, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(report) + "\n")
        if args.save_baseline:
            sys.stdout.write("baseline %s %s\n" % ("written to" if report["changed"] else "unchanged in",
                                                   args.save_baseline))
    return 1 if report["degraded"] else 0
