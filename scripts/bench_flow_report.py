#!/usr/bin/env python3
"""The flow-control evaluation's report, from herald-loadgen flow's points
(scripts/bench-flow.sh):

    bench_flow_report.py POINTS REPORT_DIR STEP_AT   writes flow.md and flow.png
    bench_flow_report.py --best-fixed POINTS SUBJECTS CHOICE   prints the best fixed limit

A run's goodput is the records answered without error per second after
its first 2 s; its p99 the median of its points' p99 latencies over the
same span. After a step at STEP_AT seconds, the time to settle is how long
until a rolling median of five points' throughput stays within 10% of the
run's final level (the median of its last quarter)."""

import collections
import json
import statistics
import sys
from pathlib import Path

WARMUP_S = 2.0
CONTROLLERS = ["last-three-points", "adaptive", "gradient"]


def runs(path):
    grouped = collections.OrderedDict()
    for line in open(path):
        p = json.loads(line)
        key = (p["scenario"], p["controller"], int(p["start_limit"]), p["subjects"], p["choice"])
        grouped.setdefault(key, []).append(p)
    return grouped


def warmup(points):
    """The first 2 s, or the first quarter of a shorter run."""
    return min(WARMUP_S, points[-1]["t"] / 4) if points else WARMUP_S


def ratio(a, b):
    return a / b if b else float("nan")


def goodput(points, start=None):
    start = warmup(points) if start is None else start
    steady = [p for p in points if p["t"] >= start]
    before = [p for p in points if p["t"] < start]
    if len(steady) < 2:
        return 0.0
    first = before[-1] if before else steady[0]
    span = steady[-1]["t"] - first["t"]
    return (steady[-1]["published"] - first["published"]) / span if span > 0 else 0.0


def p99(points, start=None):
    start = warmup(points) if start is None else start
    values = [p["p99_ms"] for p in points if p["t"] >= start]
    return statistics.median(values) if values else float("nan")


def settle(points, step_at):
    after = [p for p in points if p["t"] >= step_at]
    if len(after) < 8:
        return float("nan")
    final = statistics.median(p["throughput"] for p in after[-max(4, len(after) // 4):])
    rolling = [statistics.median(q["throughput"] for q in after[max(0, i - 4):i + 1])
               for i in range(len(after))]
    settled_from = None
    for i, value in enumerate(rolling):
        if abs(value - final) <= 0.1 * final:
            settled_from = settled_from if settled_from is not None else i
        else:
            settled_from = None
    return after[settled_from]["t"] - step_at if settled_from is not None else float("nan")


def best_fixed(grouped, subjects, choice):
    fixed = [(goodput(points), key[2]) for key, points in grouped.items()
             if key[0] == "cell" and key[1] == "fixed" and key[3] == subjects and key[4] == choice]
    return max(fixed)[1] if fixed else 1000


def main():
    if sys.argv[1] == "--best-fixed":
        print(best_fixed(runs(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
        return
    grouped = runs(sys.argv[1])
    out = Path(sys.argv[2])
    step_at = float(sys.argv[3])
    lines = ["# Flow control evaluation", "",
             "Written by scripts/bench-flow.sh (see its header for the load). Goodput: records",
             "answered per second after the first 2 s; p99: the median of each 20,000-record",
             "point's p99 request latency; ratios against the best fixed limit of the same cell.", ""]
    cells = sorted({(k[3], k[4]) for k in grouped if k[0] == "cell"})
    lines += ["| subjects | choice | setup | goodput (records/s) | p99 (ms) | goodput vs best fixed | p99 vs best fixed |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for subjects, choice in cells:
        cell = {k: v for k, v in grouped.items() if k[0] == "cell" and k[3] == subjects and k[4] == choice}
        best = best_fixed(grouped, subjects, choice)
        reference = next((v for k, v in cell.items() if k[1] == "fixed" and k[2] == best), None)
        ref_good, ref_p99 = (goodput(reference), p99(reference)) if reference else (float("nan"),) * 2
        for (scenario, controller, limit, _, _), points in cell.items():
            name = {"off": "off", "fixed": f"fixed {limit}"}.get(controller, controller)
            if controller == "fixed" and limit == best:
                name += " (best)"
            g, q = goodput(points), p99(points)
            lines.append(f"| {subjects} | {choice} | {name} | {g:,.0f} | {q:.2f} | "
                         f"{ratio(g, ref_good):.2f}x | {ratio(q, ref_p99):.2f}x |")
    lines += ["", "## Steps", "",
              f"At {step_at:g} s: the demand step starts three times as many publishers again (4x);",
              "the capacity step starts a busy thread on the broker's core.", "",
              "| step | setup | goodput before | goodput after | p99 after (ms) | time to settle (s) |",
              "| --- | --- | --- | --- | --- | --- |"]
    steps = {k: v for k, v in grouped.items() if k[0] != "cell"}
    for (scenario, controller, limit, _, _), points in steps.items():
        before = [p for p in points if p["t"] < step_at]
        after = [p for p in points if p["t"] >= step_at + 1]
        name = f"fixed {limit}" if controller == "fixed" else controller
        g_before = goodput(before) if before else float("nan")
        g_after = goodput(after, step_at + 1) if after else float("nan")
        lines.append(f"| {scenario} | {name} | {g_before:,.0f} | {g_after:,.0f} | "
                     f"{p99(after, step_at + 1):.2f} | {settle(points, step_at):.2f} |")
    (out / "flow.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    scenarios = sorted({k[0] for k in steps})
    if not scenarios:
        return
    fig, axes = plt.subplots(3, len(scenarios), figsize=(6 * len(scenarios), 9), squeeze=False)
    for column, scenario in enumerate(scenarios):
        for (s, controller, limit, _, _), points in steps.items():
            if s != scenario:
                continue
            x = [p["published"] / 1e6 for p in points]
            label = f"fixed {limit}" if controller == "fixed" else controller
            axes[0][column].plot(x, [p["limit"] for p in points], label=label)
            axes[1][column].plot(x, [p["throughput"] / 1e6 for p in points], label=label)
            axes[2][column].plot(x, [p["latency_ms"] for p in points], label=label)
        axes[0][column].set_title(scenario)
        axes[0][column].set_ylabel("in-flight limit (records)")
        axes[1][column].set_ylabel("throughput (M records/s)")
        axes[2][column].set_ylabel("mean latency (ms)")
        axes[2][column].set_xlabel("records published (millions)")
        axes[0][column].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "flow.png", dpi=90)


if __name__ == "__main__":
    main()
