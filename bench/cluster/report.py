"""The Markdown tables the cluster benchmark prints: medians and ratios."""

import statistics

from setups import COMMITS, FAILOVER, THROUGHPUT


def median(rows, key):
    values = [row[key] for row in rows if row.get(key) is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=1):
    return "-" if value is None else f"{value:,.{digits}f}"


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def print_throughput(out, rate):
    res = out["throughput"]
    # A run of some setups (--setups) shows those, and "-" for ratios to
    # the others.
    names = [s[0] for s in THROUGHPUT if s[0] in res]
    labels = {s[0]: s[1] for s in THROUGHPUT}
    rounds_run = max(len(rows) for rows in res.values())
    print(f"\n### acks=all produce, 100-byte records, one partition (medians of {rounds_run})\n")
    print("| figure | " + " | ".join(labels[n] for n in names)
          + " | herald RF 3 / herald 1 node | herald RF 3 / Kafka RF 3 | herald RF 3 / Kafka RF 3 flush |")
    print("|---|" + "---|" * (len(names) + 3))
    light = out["settings"]["light_rate"]
    for key, label in (("max_rate", "records/s (closed loop)"),
                       ("light_p50_ms", f"p50 ms at {light:,.0f}/s"), ("light_p99_ms", f"p99 ms at {light:,.0f}/s"),
                       ("p50_ms", f"p50 ms at {rate:,.0f}/s"), ("p99_ms", f"p99 ms at {rate:,.0f}/s")):
        m = {n: median(res.get(n, []), key) for n in labels}
        digits = 0 if key == "max_rate" else 2
        print(f"| {label} | " + " | ".join(fmt(m[n], digits) for n in names)
              + f" | {ratio(m['herald-rf3'], m['herald-1'])} | {ratio(m['herald-rf3'], m['kafka-rf3'])}"
              + f" | {ratio(m['herald-rf3'], m['kafka-rf3-flush'])} |")
    for n in names:
        rounds = ", ".join(fmt(row["max_rate"], 0) for row in res[n])
        print(f"  {n}: records/s per round: {rounds}")
    if all("client_cores" in row for n in names for row in res[n]):
        cores = ", ".join(f"{n} {median(res[n], 'client_cores'):.2f} / {median(res[n], 'broker_cores'):.2f}"
                          for n in names)
        print(f"  cores busy in the closed loop, client / brokers (2 on this machine): {cores}")
    short = [n for n in names if any(row["achieved"] < 0.95 * rate or row["light_achieved"] < 0.95 * light
                                     for row in res[n])]
    if short:
        print(f"\n(offered rate not sustained in some rounds by: {', '.join(short)})")


def print_failover(out):
    res = out["failover"]
    names = [s[0] for s in FAILOVER if s[0] in res]
    labels = {s[0]: s[1] for s in FAILOVER}
    count = len(res["herald-rf3"])
    print(f"\n### Failover: leader SIGKILLed under a {out['settings']['failover_rate']:,.0f}/s acks=all "
          f"stream (medians of {count})\n")
    print("| setup | new leader in Metadata, s | first successful produce after the kill, s"
          " | throughput back at >= 50%, s | records failed (timed out) | first produce, / herald"
          " | runs where the controller died too |")
    print("|---|---|---|---|---|---|---|")
    herald_first = median(res["herald-rf3"], "first_ok_s")
    for n in names:
        rows = res[n]
        first = median(rows, "first_ok_s")
        died = sum(1 for row in rows if row["controller"] == row["killed"])
        print(f"| {labels[n]} | {fmt(median(rows, 'leader_s'), 2)} | {fmt(first, 2)}"
              f" | {fmt(median(rows, 'resume_s'), 2)}"
              f" | {fmt(median(rows, 'failed'), 0)} | {ratio(first, herald_first)} | {died} of {len(rows)} |")
    for n in names:
        runs = ", ".join(f"{fmt(row.get('leader_s'), 2)}/{fmt(row['first_ok_s'], 2)}" for row in res[n])
        print(f"  {n}: per run, new leader / first successful produce (s): {runs}")


def print_commits(out):
    res = out["commits"]
    names = [s[0] for s in COMMITS if s[0] in res]
    labels = {s[0]: s[1] for s in COMMITS}
    count = max(len(rows) for rows in res.values())
    print(f"\n### Consumer-group commits, synchronous, closed loop (medians of {count})\n")
    print("| figure | " + " | ".join(labels[n] for n in names)
          + " | herald RF 3 / herald 1 node | herald RF 3 / Kafka RF 3 |")
    print("|---|" + "---|" * (len(names) + 2))
    for index, clients in ((0, 1), (1, 8)):
        for key, label, digits in (("commits_per_s", "commits/s", 0), ("p50_ms", "p50 ms", 2),
                                   ("p99_ms", "p99 ms", 2)):
            m = {n: median([rows[index] for rows in res.get(n, [])], key) for n in labels}
            print(f"| {clients} client{'s' if clients > 1 else ''}: {label} | "
                  + " | ".join(fmt(m[n], digits) for n in names)
                  + f" | {ratio(m.get('herald-rf3'), m.get('herald-1'))}"
                  + f" | {ratio(m.get('herald-rf3'), m.get('kafka-rf3'))} |")
