"""Medians of the push benchmark's rows (scripts/bench-push.sh), as Markdown.

    python3 scripts/bench_push_table.py push.jsonl
"""

import json
import statistics
import sys
from collections import defaultdict

# Seed 002's second table (department machine to department machine):
# subscribers -> (average latency in µs, dropped subscribers).
SEED_002 = {10: (786, 0), 50: (843.32, 0), 100: (9991.47, 0), 250: (36815.612, 0),
            500: (70309.902, 0), 750: (100300.1813, 0), 1000: (137854.281, 0),
            10000: (1369857.456, 0)}


def cores(rows):
    values = [r["broker_cores"] for r in rows if r.get("broker_cores") is not None]
    return f"{statistics.median(values):.2f}" if values else ""


def med(rows, field):
    return statistics.median(r[field] for r in rows)


def main(path):
    groups = defaultdict(list)
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            key = {
                "fanout": lambda r: ("fanout", (r.get("transport", "grpc"), r["subscribers"])),
                "rounds": lambda r: ("rounds", r["clients"]),
                "subjects": lambda r: ("subjects", r["keys"]),
                "memory": lambda r: ("memory", r.get("transport", "grpc")),
                "features": lambda r: ("features", r["feature"] if r.get("subject_filters", "auto") != "false" else "plain, no subject filters"),
                "priority": lambda r: ("priority", (r["flood"], r.get("apart", False), r.get("flood_rate"))),
                "catch-up": lambda r: ("catch-up", r["batch_records"]),
            }[row["scenario"]](row)
            groups[key].append(row)
    out = ["# Push benchmark", "", f"Medians of {max(len(v) for v in groups.values())} runs each.", ""]
    fanout = sorted((k[1], v) for k, v in groups.items() if k[0] == "fanout")
    if fanout:
        floor = {n: rows for (transport, n), rows in fanout if transport == "kernel"}
        out += ["## Fan-out (seed 002): one subject, 10 msg/s", "",
                "`kernel` is the floor: no broker, plain threads writing each message's send time "
                "to as many loopback sockets. The ratios are herald's mean and p99 over the floor's.", "",
                "| transport | subscribers | mean µs | p50 µs | p99 µs | max µs | dropped subscribers | delivered / expected | "
                "mean / floor | p99 / floor | broker cores | seed 002 mean µs | seed 002 dropped |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for (transport, n), rows in sorted(fanout, key=lambda kv: (kv[0][1], kv[0][0] != "kernel", kv[0][0])):
            seed = SEED_002.get(n, ("", ""))
            expected = med(rows, "published") * n
            base = floor.get(n) if transport != "kernel" else None
            mean_ratio = f"{med(rows, 'mean_us') / med(base, 'mean_us'):.1f}" if base else ""
            p99_ratio = f"{med(rows, 'p99_us') / med(base, 'p99_us'):.1f}" if base else ""
            out.append(f"| {transport} | {n} | {med(rows, 'mean_us'):.0f} | {med(rows, 'p50_us'):.0f} | {med(rows, 'p99_us'):.0f} | "
                       f"{med(rows, 'max_us'):.0f} | {med(rows, 'dropped_subscribers'):.0f} | "
                       f"{med(rows, 'delivered'):.0f} / {expected:.0f} | {mean_ratio} | {p99_ratio} | {cores(rows)} | {seed[0]} | {seed[1]} |")
        out.append("")
    rounds = sorted((k[1], v) for k, v in groups.items() if k[0] == "rounds")
    if rounds:
        out += ["## Rounds (seed 003): 20 messages per client per round, late past 1 s", "",
                "| clients | rounds | round p50 ms | slowest round ms | publish p50 ms | rounds all on time | late share |",
                "|---|---|---|---|---|---|---|"]
        for c, rows in rounds:
            out.append(f"| {c} | {rows[0]['rounds']} | {med(rows, 'round_ms_p50'):.0f} | {med(rows, 'round_ms_max'):.0f} | "
                       f"{med(rows, 'publish_ms_p50'):.0f} | {med(rows, 'rounds_on_time'):.0f} | {med(rows, 'late_share'):.2%} |")
        out.append("")
    subjects = {k[1]: v for k, v in groups.items() if k[0] == "subjects"}
    if subjects:
        out += ["## Subjects: many against few, same subscriptions and deliveries", "",
                "`one`: every delivery to one subscription on one connection; `few`: to the "
                "connections `many` delivers to, in the same order, over 16 subjects of each, so "
                "`many / few` is what the number of subjects itself costs.", "",
                "| keys | distinct keys | subscriptions | records | delivered | records/s (median) | broker ns per delivery |",
                "|---|---|---|---|---|---|---|"]

        def cpu(rows):
            values = [r["broker_ns_per_delivery"] for r in rows if r.get("broker_ns_per_delivery") is not None]
            return statistics.median(values) if values else None

        for keys in ("one", "few", "many"):
            rows = subjects.get(keys)
            if rows:
                ns = cpu(rows)
                out.append(f"| {keys} | {rows[0]['distinct_keys']} | {rows[0]['subscriptions']} | {rows[0]['records']} | "
                           f"{med(rows, 'delivered'):.0f} | {med(rows, 'records_per_sec'):,.0f} | "
                           f"{'' if ns is None else f'{ns:,.0f}'} |")
        if "many" in subjects:
            out.append("")
            for base in ("one", "few"):
                if base not in subjects:
                    continue
                rate = med(subjects["many"], "records_per_sec") / med(subjects[base], "records_per_sec")
                line = f"many / {base}: records/s {rate:.2f}"
                many_ns, base_ns = cpu(subjects["many"]), cpu(subjects[base])
                if many_ns and base_ns:
                    line += f", CPU per delivery {many_ns / base_ns:.2f}"
                out.append(line + "  ")
        out.append("")
    features = {k[1]: v for k, v in groups.items() if k[0] == "features"}
    if features:
        out += ["## Features against plain delivery (same records, same subscribers)", "",
                "| feature | records | delivered | records/s | broker ns per record | records/s vs plain | CPU vs plain |",
                "|---|---|---|---|---|---|---|"]
        plain = features.get("plain")
        for feature in ("plain", "filter", "priority", "expiry", "plain, no subject filters"):
            rows = features.get(feature)
            if not rows:
                continue
            rate = med(rows, "records_per_sec")
            cpu_rows = [r for r in rows if r.get("broker_ns_per_record") is not None]
            cpu = statistics.median(r["broker_ns_per_record"] for r in cpu_rows) if cpu_rows else None
            plain_cpu = [r["broker_ns_per_record"] for r in (plain or []) if r.get("broker_ns_per_record") is not None]
            rate_ratio = f"{rate / med(plain, 'records_per_sec'):.2f}" if plain else ""
            cpu_ratio = f"{cpu / statistics.median(plain_cpu):.2f}" if cpu is not None and plain_cpu else ""
            out.append(f"| {feature} | {rows[0]['records']} | {med(rows, 'delivered'):.0f} | {rate:,.0f} | "
                       f"{'' if cpu is None else f'{cpu:.0f}'} | {rate_ratio} | {cpu_ratio} |")
        out.append("")
    priority = {k[1]: v for k, v in groups.items() if k[0] == "priority"}
    if priority:
        out += ["## High-priority latency: idle subscriber against one flooded with normal records", "",
                "| subscriber | probes received / sent | p50 µs | p99 µs | max µs | normal published / received meanwhile |",
                "|---|---|---|---|---|---|"]
        names = {(False, False, None): "idle", (True, False, None): "flooded, same partition, as fast as the broker takes",
                 (True, True, None): "flooded, probes on another partition"}
        for rate in sorted(k[2] for k in priority if k[2] is not None):
            names[(True, False, rate)] = f"flooded at {rate:,} records/s, same partition"
        for case, name in names.items():
            rows = priority.get(case)
            if rows:
                out.append(f"| {name} | {med(rows, 'probes_received'):.0f} / {med(rows, 'probes'):.0f} | "
                           f"{med(rows, 'p50_us'):.0f} | {med(rows, 'p99_us'):.0f} | {med(rows, 'max_us'):.0f} | "
                           f"{med(rows, 'flood_published'):.0f} / {med(rows, 'flood_received'):.0f} |")
        idle = priority.get((False, False, None))
        for case in names:
            if idle and case in priority and case != (False, False, None):
                out += ["", f"p99 {names[case]} / idle: {med(priority[case], 'p99_us') / med(idle, 'p99_us'):.2f}"]
        out.append("")
    catch_up = sorted((k[1], v) for k, v in groups.items() if k[0] == "catch-up")
    if catch_up:
        out += ["## Catch-up for one subject among many: bytes read per byte delivered", "",
                "| records per batch | records | subjects | log bytes | records delivered | read/delivered with filters | without | bytes read without / with | median catch-up ms with | without |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for batch, rows in catch_up:
            with_ = [r["filtered"] for r in rows]
            without = [r["plain"] for r in rows]
            out.append(f"| {batch} | {rows[0]['records']:,} | {rows[0]['subjects']:,} | {rows[0]['log_bytes']:,} | "
                       f"{rows[0]['delivered_records']} | {med(with_, 'read_per_delivered'):,.0f} | "
                       f"{med(without, 'read_per_delivered'):,.0f} | {med(rows, 'read_ratio'):.1f} | "
                       f"{med(with_, 'median_secs') * 1000:.1f} | {med(without, 'median_secs') * 1000:.1f} |")
        out.append("")
    memory = sorted((k[1], v) for k, v in groups.items() if k[0] == "memory")
    if memory:
        out += ["## Memory", "",
                "| transport | sessions | subscriptions | heap bytes per idle session | heap bytes per subscription | resident bytes per idle session | resident bytes per subscription |",
                "|---|---|---|---|---|---|---|"]
        for transport, rows in memory:
            out.append(f"| {transport} | {rows[0]['connections']} | {rows[0]['subscriptions']} | {med(rows, 'bytes_per_idle_connection'):.0f} | "
                       f"{med(rows, 'bytes_per_subscription'):.0f} | {med(rows, 'rss_per_idle_connection'):.0f} | "
                       f"{med(rows, 'rss_per_subscription'):.0f} |")
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
