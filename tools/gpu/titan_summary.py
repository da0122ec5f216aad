"""Summary of ``measure.sh torchtitan OUTDIR ...``: each run's steady-state
tokens/s per GPU, MFU, TFLOPS and peak memory as the collection's
throughput parser reads them from the run's log (the metrics lines after
step 10: the first ones hold torch.compile's work), the loss, and the
launcher against the hand-typed torchrun where both ran: tokens/s, and the
wall time from command to exit that measure.sh wrote in runs.txt.
"""

import glob
import os
import re
import sys

from module_utils.report import throughput

WARMUP_STEPS = 10
# runs.txt: "VARIANT KIND run N: exit STATUS, SECONDS s"
RUN_LINE = re.compile(r"^(\S+) (launcher|torchrun) run (\d+): exit (\d+), ([0-9.]+) s$")


def wall_times(out):
    """{(variant, kind): [seconds of each run that exited 0]}"""
    times = {}
    path = os.path.join(out, "runs.txt")
    if os.path.exists(path):
        with open(path) as handle:
            for line in handle:
                match = RUN_LINE.match(line.strip())
                if match and match.group(4) == "0":
                    times.setdefault((match.group(1), match.group(2)), []).append(float(match.group(5)))
    return times


def main(out):
    runs = {}
    for path in sorted(glob.glob(os.path.join(out, "*-*-[0-9]*.out"))):
        match = re.match(r"(.+)-(launcher|torchrun)-(\d+)\.out$", os.path.basename(path))
        if not match:
            continue
        try:
            parsed = throughput.parse_log(path, "torchtitan")
            run = throughput.summarize_run(path, parsed, warmup_steps=WARMUP_STEPS)
        except throughput.ThroughputError as exc:
            print("%s: %s" % (os.path.basename(path), exc))
            continue
        losses = [m["figures"].get("loss") for m in parsed["measurements"]]
        figures = run["figures"]
        print("%s: tokens/s per GPU %.0f, MFU %.2f%%, %.1f TFLOPS, memory %.1f GiB, steps %s-%s (%d steady "
              "lines), loss %.3f -> %.3f" % (
                  os.path.basename(path), run["throughput"], 100 * (run["mfu"] or 0), figures.get("tflops", 0),
                  figures.get("memory_gib", 0), run["first_step"], run["last_step"], run["samples"],
                  losses[0], losses[-1]))
        runs.setdefault((match.group(1), match.group(2)), []).append(run["throughput"])
    for (variant, kind), values in sorted(runs.items()):
        if kind != "launcher" or (variant, "torchrun") not in runs:
            continue
        launcher = sum(values) / len(values)
        by_hand = sum(runs[(variant, "torchrun")]) / len(runs[(variant, "torchrun")])
        print("%s: launcher / torchrun tokens/s = %.4f (%.0f / %.0f, goal >= 0.99)" % (
            variant, launcher / by_hand, launcher, by_hand))
    times = wall_times(out)
    for (variant, kind), values in sorted(times.items()):
        if kind != "launcher" or (variant, "torchrun") not in times:
            continue
        launcher, by_hand = throughput.median(values), throughput.median(times[(variant, "torchrun")])
        print("%s: launcher / torchrun wall time = %.4f (medians %.1f / %.1f s of %d and %d runs)" % (
            variant, launcher / by_hand, launcher, by_hand, len(values), len(times[(variant, "torchrun")])))


if __name__ == "__main__":
    main(sys.argv[1])
