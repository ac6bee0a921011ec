#!/usr/bin/env python3
"""The fan-out report: medians of the rows scripts/bench-fanout.sh wrote,
ratios of herald to each comparator measured in the same run, and charts of
latency and dropped subscribers against subscriber count (the shape of
seed 002's figures).

    bench_fanout_report.py ROWS.jsonl OUTDIR [--command C] [--commit C]

Keeps every run's raw rows in OUTDIR/fanout.jsonl: the rows of ROWS.jsonl
replace those of the same layout and scenario there and the others stay, so
that a run of some scenarios (`--only`) updates their sections and leaves
the rest as last measured (each section names the commits it measured).
With --append they are added instead, as further rounds of the same points
(a run cut short, continued later): medians then cover both.
Writes OUTDIR/fanout.md, fanout.csv and fanout.png from them.
"""

import argparse
import csv
import json
import os
import platform
import statistics
from collections import defaultdict

SYSTEMS = ["websocket", "grpc", "nats", "jetstream", "mqtt-qos0", "mqtt-qos1", "kernel"]
NAMES = {
    "websocket": "herald WebSocket",
    "grpc": "herald gRPC",
    "nats": "NATS core",
    "jetstream": "NATS JetStream",
    "mqtt-qos0": "Mosquitto QoS 0",
    "mqtt-qos1": "Mosquitto QoS 1",
    "kernel": "floor (no broker)",
}
METRICS = [
    "p50_us", "p99_us", "p999_us", "mean_us", "max_us", "deliveries_per_sec",
    "broker_ns_per_delivery", "broker_cores", "broker_bytes_per_connection",
    "lost", "duplicated", "dropped_subscribers", "published", "delivered",
    "publish_secs", "subscriptions", "late_share", "broker_ns_per_message",
    "broker_bytes_per_subscription", "disturbed_subscribers", "spared_p99_us",
    "disturbed_p99_us", "disturbed_lost", "catch_up_p50_ms", "catch_up_p99_ms",
    "catch_up_max_ms", "broker_heap_bytes_per_connection", "broker_heap_bytes_per_subscription",
    "setup_retries", "planned",
]
# The systems that take part where subscribers listen to subjects, stall or
# reconnect; the floor has no subjects, no queue and no resume.
SUBJECT_SYSTEMS = ["websocket", "nats", "mqtt-qos0", "mqtt-qos1"]
# Those scenarios run herald over WebSocket only (S1 shows gRPC beside it).
OMITTED = {"grpc"}
# JetStream runs where persistence is needed (S5, S6) only.
PERSISTENT_SYSTEMS = SUBJECT_SYSTEMS + ["jetstream"]
CORE_SYSTEMS = [s for s in SYSTEMS if s != "jetstream"]


def med(rows, key):
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def kind(row):
    """The scenario; rows from before scenarios were named say `fanout`."""
    name = row.get("scenario", "fanout")
    if name == "fanout":
        return "saturation" if row["rate"] == 0 else "s1"
    return name


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def merge(new_path, kept_path, append=False):
    """The kept rows with those of the new run's (layout, scenario) pairs
    replaced by the new run's (or, appending, beside them); written back
    to kept_path."""
    new = read_rows(new_path)
    fresh = set() if append else {(r["layout"], kind(r)) for r in new}
    rows = [r for r in read_rows(kept_path) if (r["layout"], kind(r)) not in fresh] + new
    with open(kept_path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    return rows


def load(rows):
    groups = defaultdict(list)
    for row in rows:
        groups[(row["layout"], kind(row), row["subscribers"], row["transport"])].append(row)
    return groups


def commits(rows, layout, prefix):
    """The commits a section's rows were measured at."""
    found = sorted({r.get("commit", "?") for r in rows
                    if r["layout"] == layout and kind(r).startswith(prefix)})
    return ", ".join(found) or "?"


def medians(groups):
    out = {}
    for key, rows in groups.items():
        m = {k: med(rows, k) for k in METRICS}
        m["runs"] = len(rows)
        reasons = defaultdict(int)
        for r in rows:
            for why, n in r.get("disconnected", {}).items():
                reasons[why] += n
        m["disconnected"] = dict(reasons)
        out[key] = m
    return out


def ms(us):
    return "-" if us is None else (f"{us / 1000:.2f}" if us < 10_000 else f"{us / 1000:.0f}")


def num(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def cpu(r):
    """CPU per delivery, or a note when the broker's whole CPU time is too
    few of /proc's 10 ms ticks to divide."""
    ns, delivered = r.get("broker_ns_per_delivery"), r.get("delivered")
    if ns is None or not delivered:
        return "-"
    if ns * delivered < 200e6:
        return "(< 20 ticks)"
    return num(ns)


def named(s, r):
    """The system's name, with the shortfall when the broker held the
    publisher back past twice its schedule."""
    planned, published = r.get("planned"), r.get("published")
    if planned and published is not None and published < planned:
        return f"{NAMES[s]} (sent {published:,.0f} of {planned:,.0f})"
    return NAMES[s]


def memory(r, per="connection"):
    """Broker memory per connection (or subscription): herald's heap gauge
    where it was read (its resident memory keeps what the allocator
    reuses), else resident anonymous memory."""
    heap = r.get(f"broker_heap_bytes_per_{per}")
    if heap is not None:
        return f"{num(heap)} (heap)"
    return num(r.get(f"broker_bytes_per_{per}"))


def ratio(a, b):
    if a is None or b in (None, 0):
        return "-"
    r = a / b
    return f"{r:.2f}" if r >= 0.1 else f"{r:.2g}"


def core_rows(m, layout, scenario, counts, out):
    """The (subscribers, system, medians) of each point of `scenario` that
    ran, over the systems of S1 and saturation; appends the rows of those
    that did not run to `out` itself."""
    for n in counts:
        for s in CORE_SYSTEMS:
            r = m.get((layout, scenario, n, s))
            if r is None:
                out.append(f"| {n:,} | {NAMES[s]} | not run or failed | | | | | | | |")
                continue
            yield n, s, r


def s1_table(m, layout, counts):
    out = [
        "| subscribers | system | p50 ms | p99 ms | p99.9 ms | lost | dropped subscribers | broker CPU ns / delivery | broker cores | broker bytes / connection |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, s, r in core_rows(m, layout, "s1", counts, out):
        out.append(
            f"| {n:,} | {named(s, r)} | {ms(r['p50_us'])} | {ms(r['p99_us'])} | {ms(r['p999_us'])} | "
            f"{num(r['lost'])} | {num(r['dropped_subscribers'])} | {cpu(r)} | "
            f"{num(r['broker_cores'], 2)} | {memory(r)} |"
        )
    return out

def ratio_table(m, layout, what, counts, metric, label):
    rivals = ["nats", "mqtt-qos0", "mqtt-qos1", "kernel"]
    out = [
        f"| subscribers | " + " | ".join(f"herald WebSocket / {NAMES[r]}" for r in rivals) + " |",
        "| --- |" + " --- |" * len(rivals),
    ]
    def value(system):
        r = m.get((layout, what, n, system), {})
        v = r.get(metric)
        if metric == "broker_ns_per_delivery" and cpu(r) in ("-", "(< 20 ticks)"):
            return None
        return v

    for n in counts:
        herald = value("websocket")
        cells = [ratio(herald, value(r)) for r in rivals]
        out.append(f"| {n:,} | " + " | ".join(cells) + " |")
    return [f"{label}:", ""] + out


def saturation_table(m, layout, counts):
    out = [
        "| subscribers | system | deliveries / s | broker CPU ns / delivery | broker cores | p50 ms | p99 ms | lost | dropped subscribers | disconnected |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, s, r in core_rows(m, layout, "saturation", counts, out):
        out.append(
            f"| {n:,} | {NAMES[s]} | {num(r['deliveries_per_sec'])} | {cpu(r)} | "
            f"{num(r['broker_cores'], 2)} | {ms(r['p50_us'])} | {ms(r['p99_us'])} | {num(r['lost'])} | "
            f"{num(r['dropped_subscribers'])} | {disconnections(r)} |"
        )
    return out

def not_run(cells):
    return "| not run or failed" + " |" * cells


def s2_table(m, layout):
    out = [
        "| subscribers | system | deliveries | later than 1 s | p50 ms | p99 ms | p99.9 ms | lost | dropped subscribers | broker CPU ns / delivery |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    counts = sorted({k[2] for k in m if k[0] == layout and k[1] == "s2"})
    for n in counts:
        for s in CORE_SYSTEMS:
            if s in OMITTED:
                continue
            r = m.get((layout, "s2", n, s))
            if r is None:
                out.append(f"| {n:,} | {NAMES[s]} " + not_run(8))
                continue
            late = "-" if r["late_share"] is None else f"{r['late_share'] * 100:.2f}%"
            out.append(
                f"| {n:,} | {named(s, r)} | {num(r['delivered'])} | {late} | {ms(r['p50_us'])} | "
                f"{ms(r['p99_us'])} | {ms(r['p999_us'])} | {num(r['lost'])} | "
                f"{num(r['dropped_subscribers'])} | {cpu(r)} |"
            )
    return out


def subjects_table(m, layout, names):
    out = [
        "| scenario | system | messages / s | deliveries / s | broker CPU ns / message | broker CPU ns / delivery | p50 ms | p99 ms | lost | broker bytes / subscription |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in names:
        for s in CORE_SYSTEMS:
            if s in OMITTED:
                continue
            if s not in SUBJECT_SYSTEMS:
                out.append(f"| {name} | {NAMES[s]} | cannot: no subjects | | | | | | | |")
                continue
            rows = [k for k in m if k[0] == layout and k[1] == name and k[3] == s]
            if not rows:
                out.append(f"| {name} | {NAMES[s]} " + not_run(8))
                continue
            r = m[rows[0]]
            rate = r["published"] / r["publish_secs"] if r["published"] and r["publish_secs"] else None
            out.append(
                f"| {name} | {NAMES[s]} | {num(rate)} | {num(r['deliveries_per_sec'])} | "
                f"{num(r['broker_ns_per_message'])} | {cpu(r)} | {ms(r['p50_us'])} | "
                f"{ms(r['p99_us'])} | {num(r['lost'])} | {memory(r, 'subscription')} |"
            )
    return out


def disturbed_rows(m, layout, scenario, out, cannot, lead=lambda s: ""):
    """The (subscribers, system, medians) of each point of `scenario` that
    ran; appends the rows of systems that cannot take part (`cannot` says
    why) or did not run to `out` itself. `lead` gives the cells a row
    carries before its figures."""
    counts = sorted({k[2] for k in m if k[0] == layout and k[1] == scenario})
    for n in counts:
        for s in SYSTEMS:
            if s in OMITTED:
                continue
            if s not in PERSISTENT_SYSTEMS:
                out.append(f"| {n:,} | {NAMES[s]} | {cannot} | | | | | | | |")
                continue
            r = m.get((layout, scenario, n, s))
            if r is None:
                cells = lead(s)
                out.append(f"| {n:,} | {NAMES[s]} {cells}" + not_run(8 - cells.count("|")))
                continue
            yield n, s, r


def disconnections(r):
    return "; ".join(f"{k} x{v}" for k, v in r["disconnected"].items()) or "none"


def s5_table(m, layout):
    out = [
        "| subscribers | system | p99 ms of the others | p99 ms with nobody stalled | ratio | stalled | stalled lost | stalled p99 ms | lost | disconnected |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, s, r in disturbed_rows(m, layout, "s5", out, "cannot: no queue to stall against"):
        # The same run's S1 at this size (`s5-calm`, run beside each S5);
        # rows from before it was measured fall back to the last S1.
        calm = m.get((layout, "s5-calm", n, s)) or m.get((layout, "s1", n, s), {})
        s1 = calm.get("p99_us")
        out.append(
            f"| {n:,} | {NAMES[s]} | {ms(r['spared_p99_us'])} | {ms(s1)} | {ratio(r['spared_p99_us'], s1)} | "
            f"{num(r['disturbed_subscribers'])} | {num(r['disturbed_lost'])} | {ms(r['disturbed_p99_us'])} | "
            f"{num(r['lost'])} | {disconnections(r)} |"
        )
    return out


RESUMES_BY = {
    "websocket": "positions it reached",
    "nats": "cannot: core NATS keeps nothing",
    "mqtt-qos0": "persistent session (QoS 0 is not queued)",
    "mqtt-qos1": "persistent session",
    "jetstream": "push consumer from the last stream sequence it received",
}


def s6_table(m, layout):
    out = [
        "| subscribers | system | resumes by | caught up p50 ms | p99 ms | slowest ms | lost | duplicated | dropped subscribers | disconnected |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lead = lambda s: f"| {RESUMES_BY[s]} "
    for n, s, r in disturbed_rows(m, layout, "s6", out, "cannot: no resume", lead):
        out.append(
            f"| {n:,} | {NAMES[s]} | {RESUMES_BY[s]} | {num(r['catch_up_p50_ms'], 1)} | "
            f"{num(r['catch_up_p99_ms'], 1)} | {num(r['catch_up_max_ms'], 1)} | {num(r['lost'])} | "
            f"{num(r['duplicated'])} | {num(r['dropped_subscribers'])} | {disconnections(r)} |"
        )
    return out


def chart(m, layouts, counts, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (lat, drop) = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = {"pinned": "-", "unpinned": "--"}
    for layout in layouts:
        for s in SYSTEMS:
            xs, p99, dropped = [], [], []
            for n in counts:
                r = m.get((layout, "s1", n, s))
                if r is None or r["p99_us"] is None:
                    continue
                xs.append(n)
                p99.append(r["p99_us"] / 1000)
                dropped.append(r["dropped_subscribers"] or 0)
            if xs:
                label = f"{NAMES[s]} ({layout})"
                lat.plot(xs, p99, styles.get(layout, "-"), marker="o", label=label)
                drop.plot(xs, dropped, styles.get(layout, "-"), marker="o", label=label)
    for ax in (lat, drop):
        ax.set_xscale("log")
        ax.set_xlabel("subscribers (one subject, 10 msg/s, 64-byte messages)")
        ax.grid(True, which="both", alpha=0.3)
    lat.set_yscale("log")
    lat.set_ylabel("p99 publish-to-deliver latency, ms")
    drop.set_ylabel("dropped subscribers")
    lat.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("rows")
    parser.add_argument("outdir")
    parser.add_argument("--command", default="scripts/bench-fanout.sh")
    parser.add_argument("--commit", default="?")
    parser.add_argument("--append", action="store_true",
                        help="add the rows as further rounds instead of replacing")
    args = parser.parse_args()
    rows = merge(args.rows, os.path.join(args.outdir, "fanout.jsonl"), args.append)
    m = medians(load(rows))
    layouts = sorted({k[0] for k in m}, key=lambda l: l != "pinned")
    s1_counts = sorted({k[2] for k in m if k[1] == "s1"})
    sat_counts = sorted({k[2] for k in m if k[1] == "saturation"})
    counts = sorted({r["runs"] for r in m.values()})
    runs = "?" if not counts else (str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}")

    with open(os.path.join(args.outdir, "fanout.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["layout", "scenario", "subscribers", "system", "runs"] + METRICS)
        for key in sorted(m, key=lambda k: tuple(map(str, k))):
            w.writerow(list(key) + [m[key]["runs"]] + [m[key][k] for k in METRICS])

    md = [
        "# Fan-out: herald against NATS, Mosquitto and the floor",
        "",
        f"Generated by `{args.command}` (last run at commit {args.commit}) on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} cores): {'one run per point' if runs == '1' else f'medians of {runs} runs per point'}, every system's runs interleaved, "
        "ratios from medians of this same run. Do not edit by hand; rerun the script.",
        "",
        "Every system faces the same clients (`herald-loadgen push fanout`): each subscriber a "
        "connection of its own, held by single-threaded generator processes from their own "
        "loopback addresses; one publisher, open loop, at most 256 messages in flight; 64-byte "
        "messages carrying their intended send time (coordinated omission shows as latency) "
        "and a per-subject sequence number (lost and duplicated are counted, not inferred). "
        "herald stores every message durably in its log before delivering it; NATS core and "
        "Mosquitto (no persistence) keep nothing; NATS JetStream (S5, S6) stores in a file-backed "
        "stream on tmpfs, as herald's log is. The floor is a relay with no broker: one "
        "`write(2)` per delivery, the least any broker pays here.",
        "",
        "Broker CPU is from /proc over the publishing and delivering; broker bytes per "
        "connection is its anonymous memory after the subscribers connected against before, "
        "except for herald where its heap gauge was read (marked heap): on a broker that ran "
        "before, resident memory also holds what the allocator keeps for reuse.",
        "",
        "![p99 latency and dropped subscribers against subscribers](fanout.png)",
        "",
        "What limits herald's figures, from profiles of the broker under these scenarios: "
        "[fanout-profile.md](fanout-profile.md).",
        "",
    ]
    for layout in layouts:
        where = ("brokers on CPU 0, load generator on CPU 1" if layout == "pinned"
                 else "the kernel places everything")
        if s1_counts:
            md += [f"## S1: one subject, 10 msg/s, {layout} ({where})", "",
                   f"Measured at {commits(rows, layout, 's1')}.", ""]
            md += s1_table(m, layout, s1_counts) + [""]
            md += ratio_table(m, layout, "s1", s1_counts, "p99_us", "p99 latency, herald over each (below 1: herald is faster)") + [""]
            md += ratio_table(m, layout, "s1", s1_counts, "broker_ns_per_delivery", "Broker CPU per delivery, herald over each (below 1: herald uses less)") + [""]
        if sat_counts:
            md += [f"## Saturation: one subject, publisher as fast as its window allows, {layout}", "",
                   f"Measured at {commits(rows, layout, 'saturation')}.", ""]
            md += saturation_table(m, layout, sat_counts) + [""]
            md += ratio_table(m, layout, "saturation", sat_counts, "deliveries_per_sec", "Deliveries per second, herald over each (above 1: herald delivers more)") + [""]
            md += ratio_table(m, layout, "saturation", sat_counts, "broker_ns_per_delivery", "Broker CPU per delivery at saturation, herald over each") + [""]
        scenarios = {k[1] for k in m if k[0] == layout}
        if "s2" in scenarios:
            md += [f"## S2: rounds, 20 messages per subscriber a second, {layout}", "",
                   f"Measured at {commits(rows, layout, 's2')}.", "",
                   "Seed 003 counted about 3% of deliveries later than 1 s at 20,000 clients.", ""]
            md += s2_table(m, layout) + [""]
        for prefix, title in (("s3", "S3: many subjects, 100,000 subscriptions over 10,000 connections, publisher at saturation"),
                              ("s4", "S4: S3 with a pattern of 100 subjects per connection besides")):
            names = sorted(n for n in scenarios if n.startswith(prefix + "-"))
            if names:
                md += [f"## {title}, {layout}", "",
                       f"Measured at {commits(rows, layout, prefix)}.", "",
                       "Subjects are drawn from the whole range by the named distribution; one in ten "
                       "subjects has a subscriber (one subscription each), so most messages reach nobody "
                       "and CPU per message is the figure to compare; herald's topic has 16 partitions.", ""]
                md += subjects_table(m, layout, names) + [""]
        if "s5" in scenarios:
            md += [f"## S5: 1% of subscribers stop reading for 10 s, 10 msg/s, {layout}", "",
                   f"Measured at {commits(rows, layout, 's5')}.", "",
                   ("Beside each S5 run, the same system runs the same load with nobody stalling "
                    "(`s5-calm`, S1 at this size for as long): the ratio is of the two."
                    if "s5-calm" in scenarios else
                    "The ratio is against the last S1 run at this size (this S5 was measured before "
                    "S5 ran its own undisturbed load beside it)."), ""]
            md += s5_table(m, layout) + [""]
        if "s6" in scenarios:
            md += [f"## S6: every connection dropped and reopened within 1 s, 10 msg/s, {layout}", "",
                   f"Measured at {commits(rows, layout, 's6')}.", "",
                   "Caught up: from reopening until the subscriber had every message published before "
                   "that moment.", ""]
            md += s6_table(m, layout) + [""]
    with open(os.path.join(args.outdir, "fanout.md"), "w") as f:
        f.write("\n".join(md))
    chart(m, layouts, s1_counts, os.path.join(args.outdir, "fanout.png"))


if __name__ == "__main__":
    main()
