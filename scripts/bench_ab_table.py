"""Prints a markdown table comparing two sets of load-generator rows (JSON
lines, several rounds each): for every point, the median of each figure
before and after, the after/before ratio, and the range across rounds.
Used by scripts/bench-ab.sh."""

import json
import statistics
import sys
from collections import defaultdict

FIGURES = [
    ("msgs_per_s", "msgs/s", 0),
    ("broker_cpu_ns_per_msg", "CPU ns/msg", 1),
    ("p99_us", "p99 us", 0),
    ("e2e_p99_us", "e2e p99 us", 0),
]


def load(path):
    points = defaultdict(list)
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            key = (row["kind"], row["batch"], row["clients"], row.get("acks") or "")
            points[key].append(row)
    return points


def spread(values, digits):
    if not values:
        return "-"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main(before_path, after_path):
    before, after = load(before_path), load(after_path)
    print("| point | figure | before: median (range) | after: median (range) | after / before |")
    print("|---|---|---|---|---|")
    for key in sorted(set(before) | set(after), key=str):
        kind, batch, clients, acks = key
        name = f"{kind} batch {batch} x{clients}" + (f" acks={acks}" if acks else "")
        for field, label, digits in FIGURES:
            b = [r[field] for r in before.get(key, []) if r.get(field)]
            a = [r[field] for r in after.get(key, []) if r.get(field)]
            if not b and not a:
                continue
            ratio = statistics.median(a) / statistics.median(b) if a and b else float("nan")
            print(f"| {name} | {label} | {spread(b, digits)} | {spread(a, digits)} | {ratio:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
