#!/usr/bin/env python3
"""Writes docs/benchmarks/security.md from the rows of
scripts/bench-security.sh: medians per broker, setup, operation and batch
size, each herald setup as a ratio of herald's plaintext baseline measured
in the same run, TLS's cost to herald beside its cost to Apache Kafka, and
SCRAM logins per second and per broker core.

    bench_security_report.py ROWS.jsonl OUT.md COMMAND
"""

import json
import platform
import statistics
import sys
from collections import defaultdict
from datetime import datetime, timezone


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main(rows_path, out_path, command):
    rows = [json.loads(line) for line in open(rows_path) if line.strip()]
    runs = defaultdict(list)
    for row in rows:
        runs[(row["broker"], row["setup"], row["op"], row["batch"])].append(row)

    def point(broker, setup, op, batch):
        got = runs.get((broker, setup, op, batch))
        if not got:
            return None
        return {
            "per_s": median(r["per_s"] for r in got),
            "mb_per_s": median(r["mb_per_s"] for r in got),
            "cpu_ns": median(r.get("broker_cpu_ns") for r in got),
            "cores": median(r.get("broker_cores") for r in got),
            "n": len(got),
        }

    def ratio(a, b):
        return f"{a / b:.2f}x" if a and b else "n/a"

    batches = sorted({r["batch"] for r in rows if r["op"] != "scram_handshake"})
    lines = [
        "# Security benchmark: TLS, SASL and ACLs on the Kafka path",
        "",
        f"Measured {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({platform.machine()}, 2 cores shared with the client); reproduce with `{command}`.",
        "",
        "One producer (8 requests in flight, acks=1) and then one fetcher, each on one",
        "connection, one partition, data on tmpfs; 64-byte records in batches of 1 and",
        "1024 per request. Medians of the runs (n per cell). `sasl_*+acls`: SCRAM-SHA-512",
        "logins, authorization on, 10,000 ACLs over 1,000 other principals in the",
        "index. Ratios are against herald's plaintext run without authorization,",
        "measured in the same run: both heralds ran at once and their setups took",
        "turns, one run each per round, so the machine's drift falls on all alike",
        "(Kafka's two setups the same way, afterwards). Broker CPU is ns of broker",
        "CPU time per record.",
        "",
        "| broker | setup | op | batch | records/s | MB/s | vs herald plaintext | broker CPU ns/record | n |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    setups = [("herald", "plaintext"), ("herald", "ssl"), ("herald", "sasl_plaintext+acls"),
              ("herald", "sasl_ssl+acls"), ("kafka", "plaintext"), ("kafka", "ssl")]
    for op in ("produce", "fetch"):
        for batch in batches:
            base = point("herald", "plaintext", op, batch)
            for broker, setup in setups:
                p = point(broker, setup, op, batch)
                if p is None:
                    continue
                cpu = f"{p['cpu_ns']:.0f}" if p["cpu_ns"] is not None else "n/a"
                lines.append(
                    f"| {broker} | {setup} | {op} | {batch} | {p['per_s']:,.0f} | {p['mb_per_s']:.1f} | "
                    f"{ratio(p['per_s'], base and base['per_s'])} | {cpu} | {p['n']} |")
    lines += [
        "",
        "## TLS: herald's cost beside Kafka's",
        "",
        "Records per second with TLS as a fraction of the same broker's plaintext rate.",
        "",
        "| op | batch | herald ssl / plaintext | kafka ssl / plaintext | herald ssl / kafka ssl |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for op in ("produce", "fetch"):
        for batch in batches:
            hp, hs = point("herald", "plaintext", op, batch), point("herald", "ssl", op, batch)
            kp, ks = point("kafka", "plaintext", op, batch), point("kafka", "ssl", op, batch)
            get = lambda p: p["per_s"] if p else None  # noqa: E731
            lines.append(f"| {op} | {batch} | {ratio(get(hs), get(hp))} | {ratio(get(ks), get(kp))} | "
                         f"{ratio(get(hs), get(ks))} |")
    lines += [
        "",
        "## The target: SASL and ACLs on, TLS off, at least 95% of plaintext",
        "",
        "| op | batch | sasl_plaintext+acls / plaintext | met |",
        "| --- | ---: | ---: | --- |",
    ]
    for op in ("produce", "fetch"):
        for batch in batches:
            base, sasl = point("herald", "plaintext", op, batch), point("herald", "sasl_plaintext+acls", op, batch)
            if base and sasl:
                share = sasl["per_s"] / base["per_s"]
                lines.append(f"| {op} | {batch} | {share:.2f}x | {'yes' if share >= 0.95 else 'no'} |")
    hs = runs.get(("herald", "sasl_plaintext", "scram_handshake", 0), [])
    if hs:
        per_s = median(r["per_s"] for r in hs)
        cores = median(r.get("broker_cores") for r in hs)
        per_core = per_s / cores if cores else None
        lines += [
            "",
            "## SCRAM-SHA-512 logins",
            "",
            "8 tasks each connecting, logging in (SaslHandshake, two SaslAuthenticate",
            "steps, 4,096 PBKDF2 iterations on the client's side only: the broker keeps",
            "the derived keys) and closing, as fast as they can; the client shares the",
            "machine's two cores with the broker.",
            "",
            "| logins/s | broker cores busy | logins per broker core-second | n |",
            "| ---: | ---: | ---: | ---: |",
            f"| {per_s:,.0f} | {cores:.2f} | {per_core:,.0f} | {len(hs)} |" if per_core else
            f"| {per_s:,.0f} | n/a | n/a | {len(hs)} |",
        ]
    open(out_path, "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
