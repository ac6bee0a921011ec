#!/usr/bin/env python3
"""The flow-control evaluation's report, from herald-loadgen flow's points
(scripts/bench-flow.sh):

    bench_flow_report.py POINTS REPORT_DIR STEP_AT REGIME [STEM]   writes STEM.md and .png (default flow-REGIME)
    bench_flow_report.py --top-fixed POINTS SUBJECTS CHOICE N   prints the sweep's N best fixed limits
    bench_flow_report.py --best-fixed POINTS SUBJECTS CHOICE   prints the reference fixed limit
    bench_flow_report.py --overload-peak POINTS BROKER REPEAT  prints that peak run's goodput
    bench_flow_report.py --overload POINTS REPORT_DIR          writes flow-overload.md
    bench_flow_report.py --interleaved POINTS REPORT_DIR SKIP  writes flow-interleaved.md

A run's goodput is the records answered without error per second after
its first 2 s; its p99 the median of its points' p99 latencies over the
same span. A setup run several times (the `repeat` label, a round of the
comparison) is reported by the median of its runs' figures, and compared
with the reference (the sweep's best fixed limit) by the median of its
ratios to the reference's run of the same round.

After a step at STEP_AT seconds, the goodput has settled from the start of
the first half-second window after which every window's goodput stays
within a band around the final level (the mean of the second half after
the step): 10% of it, or three standard deviations of those final windows
when the run's own noise is wider (the band is reported). A controller's
limit has settled from the first point after which it stays within 20% of
its final value (the median over the last quarter). Settled only over the
stretch that sets the final level is reported as not settled.

A second goodput measure reads one-second windows taken every 0.1 s
instead, within a fixed 10% of the goodput over the second half after
the step: a broker throttled by a CPU quota runs and stops every 100 ms,
which swings a half-second window by 20-50% and so widened the first
measure's band; a second averages ten such periods. Its "swing" is the
most a window of that second half strays from the level."""

import collections
import json
import math
import statistics
import sys
from pathlib import Path

WARMUP_S = 2.0
CONTROLLERS = ["last-three-points", "adaptive", "gradient"]


def rounds(path):
    """{(scenario, controller, start limit, subjects, choice): {repeat:
    points}}, in the order first seen."""
    grouped = collections.OrderedDict()
    for line in open(path):
        p = json.loads(line)
        key = (p["scenario"], p["controller"], int(p["start_limit"]), p["subjects"], p["choice"])
        grouped.setdefault(key, collections.OrderedDict()).setdefault(
            p.get("repeat", "1"), []).append(p)
    return grouped


def runs(path):
    """{(scenario, controller, start limit, subjects, choice): [points of
    each repeat]}, in the order first seen."""
    return collections.OrderedDict((k, list(v.values())) for k, v in rounds(path).items())


def median_of(repeats, figure, *args):
    return median_known(figure(points, *args) for points in repeats)


def median_known(values):
    """The median of the values that are numbers (NaN: not measured)."""
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def final_limit(points):
    """The limit over the run's last quarter (median)."""
    tail = points[-max(1, len(points) // 4):]
    return statistics.median(p["limit"] for p in tail) if tail else float("nan")


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


def published_at(points, t):
    """Records answered by time t, interpolated between points."""
    previous = (0.0, 0)
    for p in points:
        if p["t"] >= t:
            span = p["t"] - previous[0]
            share = (t - previous[0]) / span if span > 0 else 1.0
            return previous[1] + share * (p["published"] - previous[1])
        previous = (p["t"], p["published"])
    return float(previous[1])


SETTLE_WINDOW_S = 0.5


def goodput_windows(points, start, width=SETTLE_WINDOW_S, stride=SETTLE_WINDOW_S):
    """[(window start, records/s)] over windows of `width` seconds from
    start, one every `stride` seconds (by default half-second windows
    side by side)."""
    if not points:
        return []
    windows, k = [], 0
    while start + k * stride + width <= points[-1]["t"] + 1e-9:
        t = start + k * stride
        answered = published_at(points, t + width) - published_at(points, t)
        windows.append((t, answered / width))
        k += 1
    return windows


def settled_from(windows, final, band, tail_start):
    """The start of the first window after which every window lies within
    `band` of `final`; NEVER when that is only the final stretch (from
    tail_start), which sets the level."""
    since = None
    for t, value in windows:
        if abs(value - final) <= band:
            since = since if since is not None else t
        else:
            since = None
    return NEVER if since is None or since >= tail_start else since


def settle_band(points, step_at):
    """(final goodput, half-width of the band) after the step."""
    windows = goodput_windows(points, step_at)
    if len(windows) < 6:
        return float("nan"), float("nan")
    tail = [v for _, v in windows[len(windows) // 2:]]
    final = statistics.fmean(tail)
    return final, max(0.1 * final, 3 * statistics.pstdev(tail))


NEVER = float("inf")


def settle(points, step_at):
    """Seconds from the step until the goodput stays in its band; NEVER
    when it is in the band only over the final half, which sets the band
    (and so is always inside it)."""
    windows = goodput_windows(points, step_at)
    final, band = settle_band(points, step_at)
    if final != final:
        return float("nan")
    since = settled_from(windows, final, band, windows[len(windows) // 2][0])
    return NEVER if since == NEVER else since - step_at


SMOOTH_WINDOW_S = 1.0
SMOOTH_STRIDE_S = 0.1
SMOOTH_BAND = 0.1


def smoothed_settle(points, step_at):
    """(seconds from the step until every later one-second window's
    goodput stays within 10% of the final level, the largest share by
    which a window of the final half strays from it). The final level is
    the goodput over the second half after the step; the time is NEVER
    when only windows starting in that half are inside the band."""
    end = points[-1]["t"] if points else step_at
    if end - step_at < 4 * SMOOTH_WINDOW_S:
        return float("nan"), float("nan")
    middle = step_at + (end - step_at) / 2
    final = (published_at(points, end) - published_at(points, middle)) / (end - middle)
    if final <= 0:
        return float("nan"), float("nan")
    # One-second windows, one every tenth of a second: a broker throttled
    # by a CPU quota runs and stops every 100 ms (the cgroup's period),
    # which swings a half-second window by 20-50%; a second averages ten
    # periods.
    windows = goodput_windows(points, step_at, SMOOTH_WINDOW_S, SMOOTH_STRIDE_S)
    swing = max(abs(v - final) / final for t, v in windows if t >= middle)
    since = settled_from(windows, final, SMOOTH_BAND * final, middle)
    return (NEVER if since == NEVER else since - step_at), swing


def band_share(points, step_at):
    final, band = settle_band(points, step_at)
    return band / final if final else float("nan")


def limit_settle(points, step_at):
    """Seconds from the step until the limit stays within 20% of its final
    value: 0 when it already was at the step, NEVER when only the last
    quarter (which sets the final value) is."""
    after = [p for p in points if p["t"] >= step_at]
    if len(after) < 4:
        return float("nan")
    tail_start = len(after) - max(1, len(after) // 4)
    final = final_limit(after)
    settled_from = None
    for i, p in enumerate(after):
        if abs(p["limit"] - final) <= 0.2 * final:
            settled_from = settled_from if settled_from is not None else i
        else:
            settled_from = None
    if settled_from is None or settled_from >= tail_start:
        return NEVER
    return 0.0 if settled_from == 0 else after[settled_from]["t"] - step_at


def capacity_step_text(steps):
    """What the capacity step did, by the `capacity` label of its runs'
    points (bench-flow.sh's CAPACITY: quota, cpu or disk); runs without the
    label are the CPU step's (the label came with the disk step)."""
    kinds = collections.OrderedDict()
    for key, repeated in steps.items():
        if key[0] != "capacity-step":
            continue
        for points in repeated:
            if points:
                kinds.setdefault(points[0].get("capacity", "cpu"), []).append(points)
    # (whether the phrase is a clause of its own, the phrase)
    phrases = []
    for kind, runs_ in kinds.items():
        if kind == "quota":
            phrases.append((True, quota_step_text([points[0] for points in runs_])))
            continue
        if kind != "disk":
            phrases.append((False, "starts a busy thread on the broker's core"))
            continue
        first = runs_[0][0]
        rates = [p["disk_hog_syncs"] / p["disk_hog_secs"]
                 for p in (points[0] for points in runs_)
                 if p.get("disk_hog_secs")]
        rate = f" (a median of {statistics.median(rates):,.0f} syncs/s while it ran)" if rates else ""
        threads = int(first.get("disk_hog_threads", 1))
        block = int(first.get("disk_hog_bytes", 4096))
        phrases.append((False,
            f"starts {threads} thread{'s' if threads != 1 else ''} on the broker's data disk "
            f"writing a {block:,}-byte block and fdatasyncing it, over and over, competing "
            f"with the broker's fsyncs for the disk's flushes{rate}"))
    if not phrases:
        phrases.append((False, "starts a busy thread on the broker's core"))
    texts = []
    for i, (clause, phrase) in enumerate(phrases):
        lead = "the capacity step" if i == 0 else "in other runs"
        texts.append(f"{lead}: {phrase}" if clause else f"{lead}{'' if i == 0 else ' it'} {phrase}")
    return "; ".join(texts)


def quota_step_text(firsts):
    """The CPU quota step's phrase, from the first point of each of its
    runs (herald-loadgen's quota_share, quota_us, quota_period_us and
    quota_layout labels)."""
    shares = sorted({float(p.get("quota_share", 0.5)) for p in firsts})
    first = firsts[0]
    layout = first.get("quota_layout", "")
    cgroup = {"v1": "cgroup v1 cpu.cfs_quota_us", "v2": "cgroup v2 cpu.max"}.get(layout, "cgroup")
    if shares == [0.5]:
        what = "a CPU quota halves the broker's core"
    else:
        what = "a CPU quota cuts the broker to " + " or ".join(f"{s:g}" for s in shares) + " of a core"
    detail = f"{cgroup}: a share of {' or '.join(f'{s:g}' for s in shares)} of one core"
    if len(shares) == 1 and first.get("quota_us") and first.get("quota_period_us"):
        detail += f", {int(first['quota_us']):,} µs of CPU every {int(first['quota_period_us']):,} µs"
    return f"{what} ({detail}, across all its threads)"


def seconds(value):
    """A settle time as reported."""
    if value != value:
        return "-"
    return "not settled" if value == NEVER else f"{value:.2f}"


def fixed_by_goodput(grouped, scenario, subjects, choice):
    """[(median goodput, limit)] of the cell's fixed limits in that
    scenario, best first."""
    fixed = [(median_of(repeats.values(), goodput), key[2]) for key, repeats in grouped.items()
             if key[0] == scenario and key[1] == "fixed" and key[3] == subjects and key[4] == choice]
    return sorted(fixed, reverse=True)


def top_fixed(grouped, subjects, choice, count):
    """The sweep's `count` fixed limits with the most goodput."""
    return [limit for _, limit in fixed_by_goodput(grouped, "sweep", subjects, choice)[:count]]


def best_fixed(grouped, subjects, choice):
    """The reference: the sweep's best fixed limit. Its goodput in the
    comparison comes from fresh runs: picking the better of the fixed
    limits by those same runs would favour whichever had the luckier
    runs."""
    for scenario in ("sweep", "cell"):
        ranked = fixed_by_goodput(grouped, scenario, subjects, choice)
        if ranked:
            return ranked[0][1]
    return 1000


def paired(repeated, reference, figure):
    """The median over rounds of a setup's figure divided by the
    reference's in the same round."""
    ratios = [ratio(figure(points), figure(reference[r]))
              for r, points in repeated.items() if r in reference]
    ratios = [v for v in ratios if v == v]
    return statistics.median(ratios) if ratios else float("nan")


def paired_mean(repeated, references, figure):
    """As `paired`, against the mean of several references' figures in
    the same round (a reference that no one setup's luck decides)."""
    ratios = []
    for r, points in repeated.items():
        figures = [figure(ref[r]) for ref in references if r in ref]
        if figures:
            ratios.append(ratio(figure(points), statistics.fmean(figures)))
    ratios = [v for v in ratios if v == v]
    return statistics.median(ratios) if ratios else float("nan")


def spread(repeated, figure):
    """(lowest, highest) of the runs' figures as shares of their median."""
    values = [figure(points) for points in repeated.values()]
    values = [v for v in values if v == v]
    if not values:
        return float("nan"), float("nan")
    middle = statistics.median(values)
    return ratio(min(values), middle), ratio(max(values), middle)


def overload_runs(path):
    """{(broker, scenario, controller, start limit): {repeat: points}}."""
    grouped = collections.OrderedDict()
    for line in open(path):
        p = json.loads(line)
        key = (p["broker"], p["scenario"], p["controller"], int(p["start_limit"]))
        grouped.setdefault(key, collections.OrderedDict()).setdefault(p["repeat"], []).append(p)
    return grouped


def overload_peak(path, broker, repeat):
    for (b, scenario, _, _), repeats in overload_runs(path).items():
        if b == broker and scenario == "peak" and repeat in repeats:
            return goodput(repeats[repeat])
    return 0.0


def expired_share(points):
    """Requests refused by a full client buffer or answered late, of all
    requests due after the warm-up (answered records / 16 records per
    request, plus those)."""
    start = warmup(points)
    steady = [p for p in points if p["t"] >= start]
    if not steady:
        return float("nan")
    before = [p for p in points if p["t"] < start]
    answered = steady[-1]["published"] - (before[-1]["published"] if before else 0)
    expired = sum(p["expired"] for p in steady)
    requests = answered / 16 + expired
    return expired / requests if requests else float("nan")


def overload_report(path, out):
    grouped = overload_runs(path)
    peaks = {}
    for (broker, scenario, _, _), repeats in grouped.items():
        if scenario == "peak":
            peaks[broker] = statistics.median(goodput(points) for points in repeats.values())
    lines = ["# Flow control under overload", "",
             "Written by scripts/bench-flow-overload.sh (see its header for the load): open-loop",
             "producers offering twice each broker's own closed-loop peak, a request refused at",
             "once when its connection's buffer (256 requests) is full and counted as timed out if",
             "answered more than 5 s after it was due. Goodput: records answered within the 5 s,",
             "per second, after the first 2 s; p99: the median of each point's p99 latency from",
             "when the request was due; refused or late: of all requests due. Medians of the",
             "repeats.", "",
             "| broker | setup | peak (records/s) | offered | goodput | goodput vs peak | p99 (ms) | refused or late | limit |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (broker, scenario, controller, limit), repeats in grouped.items():
        if scenario != "overload":
            continue
        runs_ = list(repeats.values())
        offered = statistics.median(float(points[0]["offered"]) for points in runs_ if points)
        name = {"off": "gate off", "fixed": f"fixed {limit}"}.get(controller, controller)
        g = median_of(runs_, goodput)
        peak = peaks.get(broker, float("nan"))
        shown_limit = "" if controller in ("off", "fixed", "kafka") else f"{median_of(runs_, final_limit):,.0f}"
        lines.append(f"| {broker} | {name} | {peak:,.0f} | {offered:,.0f} | {g:,.0f} | "
                     f"{ratio(g, peak):.2f}x | {median_of(runs_, p99):.0f} | "
                     f"{100 * median_of(runs_, expired_share):.1f}% | {shown_limit} |")
    (out / "flow-overload.md").write_text("\n".join(lines) + "\n")


def turns(points, skip):
    """{setup: {cycle: (goodput, p99, limit)}} from one interleaved run's
    points, each turn told by the turn index its points carry: a turn's
    goodput over its points that began at least `skip` s after the switch,
    its p99 and limit the medians of theirs (NaN when none was kept)."""
    kept = collections.OrderedDict()
    previous_t, previous_published = 0.0, 0
    for p in points:
        span = p["t"] - previous_t
        records = p["published"] - previous_published
        previous_t, previous_published = p["t"], p["published"]
        if p.get("setup") is None or p.get("turn") is None:
            continue
        its = kept.setdefault((p["setup"], p["turn"], p["cycle"]), [])
        if p.get("since_switch", 0.0) >= skip and span > 0:
            its.append((span, records, p["p99_ms"], p["limit"]))
    nan = float("nan")
    out = collections.OrderedDict()
    for (setup, _, cycle), its in kept.items():
        time = sum(k[0] for k in its)
        out.setdefault(setup, {})[cycle] = (
            sum(k[1] for k in its) / time if time > 0 else nan,
            statistics.median(k[2] for k in its) if its else nan,
            statistics.median(k[3] for k in its) if its else nan)
    return out


def complete_cycles(figures):
    """The cycles after the first (the controllers' warm-up) in which every
    setup had a turn with a goodput and a p99 to compare (positive: a ratio
    to a zero would be NaN, and a median over NaN is meaningless)."""
    cycles = set.intersection(*(set(its) for its in figures.values())) if figures else set()
    return sorted(c for c in cycles if c > 0 and all(
        figures[s][c][0] > 0 and figures[s][c][1] > 0 for s in figures))


def cross_fitted(figures, column, fixed):
    """Each setup's ratios to a reference fixed limit, cycle by cycle over
    the complete cycles: the reference for the odd cycles is the fixed
    limit with the most median goodput over the even ones, and the other
    way round, so that no cycle both picks the reference and is compared
    with it. {setup: [ratios]}, and the references picked."""
    cycles = complete_cycles(figures)
    halves = [[c for c in cycles if c % 2 == parity] for parity in (0, 1)]
    ratios = {setup: [] for setup in figures}
    picked = []
    for judged, picking in ((halves[0], halves[1]), (halves[1], halves[0])):
        if not judged or not picking:
            continue
        reference = max(fixed, key=lambda f: statistics.median(
            figures[f][c][0] for c in picking))
        picked.append(reference)
        for setup, its in figures.items():
            for c in judged:
                ratios[setup].append(ratio(its[c][column], figures[reference][c][column]))
    return ratios, picked


def clearly(ratios, p99_ratio):
    """"met" when even the first quartile of the goodput ratios reaches
    0.95 and the p99 ratio is within 1.5, "missed" when even the third
    quartile falls short of 0.95 or the p99 ratio is past 1.5, otherwise
    None (the noise decides)."""
    if len(ratios) < 2:
        return None
    q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    if q3 < 0.95 or p99_ratio > 1.5:
        return "missed"
    if q1 >= 0.95:
        return "met"
    return None


def quartiles(values):
    """"q1-q3" of `values`, or "-" with fewer than two."""
    if len(values) < 2:
        return "-"
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return f"{q1:.2f}-{q3:.2f}"


def interleaved_report(path, out, skip):
    runs_ = collections.OrderedDict()
    for line in open(path):
        p = json.loads(line)
        runs_.setdefault((p["subjects"], p["choice"]), []).append(p)
    lines = ["# Flow control evaluation: setups interleaved", "",
             "Written by `scripts/bench-flow.sh --interleaved` (see its header): one broker run",
             "per cell takes every setup in turn, switching the flow control over the admin API.",
             "Each cycle gives every setup one turn, in the order of a row of a Williams square;",
             "a controller carries on in each turn where its previous one ended (limit and history).",
             f"A turn's goodput counts its points from {skip:g} s after the switch; the first cycle",
             "(the controllers' warm-up) is not counted, nor a cycle in which a setup's turn had",
             "nothing to count. Goodput and p99: medians over the counted turns.",
             "\"vs ref\": the median of the cycle-by-cycle ratios to a reference fixed limit picked",
             "by the other half of the cycles (cross-fitted: the odd cycles' reference is the best",
             "fixed limit over the even cycles and the other way round); the goodput ratios'",
             "quartiles say how far one cycle's ratio strays.", "",
             "| subjects | choice | setup | turns | goodput (records/s) | p99 (ms) | limit | goodput vs ref (q1-q3) | p99 vs ref |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    verdicts = collections.OrderedDict()
    for (subjects, choice), points in sorted(runs_.items()):
        figures = turns(points, skip)
        fixed = [s_ for s_ in figures if s_.startswith("fixed:")]
        if not fixed:
            continue
        goodputs, picked = cross_fitted(figures, 0, fixed)
        p99s, _ = cross_fitted(figures, 1, fixed)
        counted_cycles = complete_cycles(figures)
        for setup, its in figures.items():
            counted = [its[c] for c in counted_cycles]
            g = statistics.median(t[0] for t in counted) if counted else float("nan")
            q = statistics.median(t[1] for t in counted) if counted else float("nan")
            shown_limit = (f"{statistics.median(t[2] for t in counted):,.0f}"
                           if counted and not setup.startswith(("off", "fixed")) else "")
            vs_g = statistics.median(goodputs[setup]) if goodputs[setup] else float("nan")
            vs_q = statistics.median(p99s[setup]) if p99s[setup] else float("nan")
            name = setup + (" (ref)" if setup in picked else "")
            spread_ = quartiles(goodputs[setup])
            lines.append(f"| {subjects} | {choice} | {name} | {len(counted)} | {g:,.0f} | {q:.2f} | "
                         f"{shown_limit} | {vs_g:.3f}x ({spread_}) | {vs_q:.3f}x |")
            if not setup.startswith("fixed"):
                verdicts.setdefault(setup.split(":")[0], []).append(
                    (vs_g >= 0.95 and vs_q <= 1.5, clearly(goodputs[setup], vs_q)))
    lines += ["", "Cells where the setup's goodput is at least 0.95x the reference's and its p99 at",
              "most 1.5x (issue 18's target); \"clearly\" when the quartiles of its cycle-by-cycle",
              "goodput ratios lie on the same side of 0.95 (and the p99 within 1.5x for a clear",
              "pass), the rest being within this machine's noise:", ""]
    for setup, cells in verdicts.items():
        met = sum(1 for m, _ in cells if m)
        passed = sum(1 for _, c in cells if c == "met")
        missed = sum(1 for _, c in cells if c == "missed")
        lines.append(f"- {'the gate off' if setup == 'off' else setup}: {met} of {len(cells)} "
                     f"(clearly met {passed}, clearly missed {missed})")
    (out / "flow-interleaved.md").write_text("\n".join(lines) + "\n")


def main():
    if sys.argv[1] == "--overload-peak":
        print(int(overload_peak(sys.argv[2], sys.argv[3], sys.argv[4])))
        return
    if sys.argv[1] == "--overload":
        overload_report(sys.argv[2], Path(sys.argv[3]))
        return
    if sys.argv[1] == "--interleaved":
        interleaved_report(sys.argv[2], Path(sys.argv[3]), float(sys.argv[4]))
        return
    if sys.argv[1] == "--best-fixed":
        print(best_fixed(rounds(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
        return
    if sys.argv[1] == "--top-fixed":
        print(" ".join(str(limit) for limit in top_fixed(
            rounds(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))))
        return
    grouped = rounds(sys.argv[1])
    out = Path(sys.argv[2])
    step_at = float(sys.argv[3])
    regime = sys.argv[4] if len(sys.argv) > 4 else "durable"
    # The report's file name (without .md / .png): STEPS_ONLY runs write
    # their own, beside the full evaluation's.
    stem = sys.argv[5] if len(sys.argv) > 5 else f"flow-{regime}"
    cell_rounds = max((len(r) for k, r in grouped.items() if k[0] == "cell"), default=0)
    step_rounds = max((len(r) for k, r in grouped.items() if k[0] not in ("cell", "sweep")), default=0)
    lines = [f"# Flow control evaluation: {regime} regime", "",
             "Written by scripts/bench-flow.sh (see its header for the load and the two phases).",
             "Goodput: records answered per second after the first 2 s; p99: the median of each",
             "20,000-record point's p99 request latency (client side: from the request's write to",
             "its answer); limit: the controller's limit over the run's last quarter.", "",
             "## The sweep", "",
             *(["One run per setup; the two fixed limits with the most goodput (marked) go on to the",
                "comparison.", ""] if cell_rounds else
               ["One run per setup; the fixed limit with the most goodput (marked) is the steps'",
                "reference.", ""]),
             "| subjects | choice | setup | goodput (records/s) | p99 (ms) |",
             "| --- | --- | --- | --- | --- |"]
    cells = sorted({(k[3], k[4]) for k in grouped if k[0] in ("cell", "sweep")})
    for subjects, choice in cells:
        chosen = top_fixed(grouped, subjects, choice, 2 if cell_rounds else 1)
        for (scenario, controller, limit, s_, c_), repeated in grouped.items():
            if scenario != "sweep" or (s_, c_) != (subjects, choice):
                continue
            name = {"off": "off", "fixed": f"fixed {limit}"}.get(controller, controller)
            if controller == "fixed" and limit in chosen:
                name += " (on)"
            lines.append(f"| {subjects} | {choice} | {name} | {median_of(repeated.values(), goodput):,.0f} | "
                         f"{median_of(repeated.values(), p99):.2f} |")
    if not cell_rounds:
        lines += ["", "## The comparison", "",
                  "Not run (STEPS_ONLY): the sweep above only picks the steps' reference."]
    lines += [] if not cell_rounds else ["", "## The comparison", "",
              f"{cell_rounds} rounds per cell, every setup once per round. The reference (ref) is the",
              "sweep's best fixed limit, measured afresh here; \"vs ref\" is the median over the",
              "rounds of the setup's figure divided by the reference's in the same round; \"vs",
              "fixed mean\" divides by the mean of both fixed limits' runs of the round instead.",
              "Spread is the reference's lowest and highest run as shares of its median (how far",
              "this machine moves one setup between runs).", "",
              "| subjects | choice | setup | goodput (records/s) | p99 (ms) | limit | goodput vs ref | p99 vs ref | goodput vs fixed mean | p99 vs fixed mean |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    verdicts = {c: [] for c in CONTROLLERS + ["off"]}
    mean_verdicts = {c: [] for c in CONTROLLERS + ["off"]}
    for subjects, choice in cells:
        cell = {k: v for k, v in grouped.items() if k[0] == "cell" and k[3] == subjects and k[4] == choice}
        if not cell:
            continue
        best = best_fixed(grouped, subjects, choice)
        reference = next((v for k, v in cell.items() if k[1] == "fixed" and k[2] == best), {})
        fixed_runs = [v for k, v in cell.items() if k[1] == "fixed"]
        for (scenario, controller, limit, _, _), repeated in cell.items():
            name = {"off": "off", "fixed": f"fixed {limit}"}.get(controller, controller)
            if controller == "fixed" and limit == best:
                low, high = spread(repeated, goodput)
                name += f" (ref; spread {low:.2f}-{high:.2f})"
            g, q = median_of(repeated.values(), goodput), median_of(repeated.values(), p99)
            vs_good, vs_p99 = paired(repeated, reference, goodput), paired(repeated, reference, p99)
            mean_good = paired_mean(repeated, fixed_runs, goodput)
            mean_p99 = paired_mean(repeated, fixed_runs, p99)
            shown_limit = "" if controller in ("off", "fixed") else f"{median_of(repeated.values(), final_limit):,.0f}"
            lines.append(f"| {subjects} | {choice} | {name} | {g:,.0f} | {q:.2f} | {shown_limit} | "
                         f"{vs_good:.3f}x | {vs_p99:.3f}x | {mean_good:.3f}x | {mean_p99:.3f}x |")
            if controller in verdicts:
                verdicts[controller].append(vs_good >= 0.95 and vs_p99 <= 1.5)
                mean_verdicts[controller].append(mean_good >= 0.95 and mean_p99 <= 1.5)
    lines += [] if not cell_rounds else [
              "", "Cells where the setup's goodput is at least 0.95x the reference's and its p99 at",
              "most 1.5x (issue 18's target), by the paired medians above (against the mean of",
              "the two fixed limits in brackets):", ""]
    for controller, met in verdicts.items():
        if met:
            name = "the gate off" if controller == "off" else controller
            lines.append(f"- {name}: {sum(met)} of {len(met)} "
                         f"({sum(mean_verdicts[controller])} of {len(mean_verdicts[controller])})")
    steps = {k: list(v.values()) for k, v in grouped.items() if k[0] not in ("cell", "sweep")}
    lines += ["", "## Steps", "",
              f"At {step_at:g} s: the demand step starts three times as many publishers again (4x);",
              f"{capacity_step_text(steps)}. Medians of",
              f"{step_rounds} runs; settle times as described in scripts/bench_flow_report.py (goodput:",
              "its half-second windows stay within the band around the final level; limit: within",
              "20% of its final value; \"not settled\": only over the stretch that sets the final",
              "level, so not before it). \"1 s windows\": the same for one-second windows taken",
              "every 0.1 s, within 10% of the final level (a CPU quota's 100 ms periods swing a",
              "half-second window); \"swing\": the most such a window of the final half strays.", "",
              "| step | setup | goodput before | goodput after | p99 after (ms) | goodput settles (s) | band | goodput settles, 1 s windows (s) | swing | limit settles (s) | goodput settle times of the runs (s) | 1 s windows, runs (s) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]

    def before_step(points):
        before = [p for p in points if p["t"] < step_at]
        return goodput(before) if before else float("nan")

    def after_step(points):
        after = [p for p in points if p["t"] >= step_at + 1]
        return goodput(after, step_at + 1) if after else float("nan")

    def p99_after(points):
        return p99([p for p in points if p["t"] >= step_at + 1], step_at + 1)

    for (scenario, controller, limit, _, _), repeated in steps.items():
        name = f"fixed {limit}" if controller == "fixed" else controller
        settles = [settle(points, step_at) for points in repeated]
        limit_settles = "-" if controller == "fixed" else seconds(median_of(repeated, limit_settle, step_at))
        smoothed = [smoothed_settle(points, step_at) for points in repeated]
        lines.append(f"| {scenario} | {name} | {median_of(repeated, before_step):,.0f} | "
                     f"{median_of(repeated, after_step):,.0f} | {median_of(repeated, p99_after):.2f} | "
                     f"{seconds(median_of(repeated, settle, step_at))} | "
                     f"±{100 * median_of(repeated, band_share, step_at):.0f}% | "
                     f"{seconds(median_known(t for t, _ in smoothed))} | "
                     f"{100 * median_known(w for _, w in smoothed):.0f}% | {limit_settles} | "
                     f"{', '.join(seconds(t) for t in settles)} | "
                     f"{', '.join(seconds(t) for t, _ in smoothed)} |")
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
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
        for (s, controller, limit, _, _), repeated in steps.items():
            if s != scenario:
                continue
            points = repeated[0]
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
    fig.suptitle(f"{regime} regime, first run of each setup")
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=90)


if __name__ == "__main__":
    main()
