"""The flow evaluation's interleaved report (scripts/bench_flow_report.py):
turns told apart by their index, warm-up and incomplete cycles left out,
and a reference that is never judged by the cycles that picked it."""

import importlib.util
import math
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_flow_report.py"
spec = importlib.util.spec_from_file_location("bench_flow_report", SCRIPT)
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)


def run_of(turns_):
    """Points of one run from [(setup, cycle, [(seconds, records, p99, since_switch)])],
    one turn after another; `published` and `t` accumulate as the load
    generator writes them."""
    points, t, published = [], 0.0, 0
    for index, (setup, cycle, its) in enumerate(turns_):
        for seconds, records, p99, since in its:
            t += seconds
            published += records
            points.append({"t": t, "published": published, "p99_ms": p99, "limit": 700,
                           "setup": setup, "turn": index, "cycle": cycle,
                           "since_switch": since})
    return points


def test_a_turn_counts_only_its_points_past_the_skip_and_turns_of_one_setup_stay_apart():
    points = run_of([
        ("fixed:512", 0, [(1.0, 1_000, 9.0, 0.0), (1.0, 3_000, 2.0, 1.0), (1.0, 5_000, 4.0, 2.0)]),
        ("adaptive:100", 0, [(2.0, 4_000, 3.0, 0.0)]),
        # The next cycle starts with the setup that ended the last one: its
        # turns must not merge.
        ("adaptive:100", 1, [(1.0, 500, 7.0, 0.0), (1.0, 6_000, 5.0, 1.5)]),
        ("fixed:512", 1, [(1.0, 100, 1.0, 0.2)]),
    ])
    figures = report.turns(points, skip=1.0)
    assert figures["fixed:512"][0] == (4_000.0, 3.0, 700)
    assert figures["adaptive:100"][1] == (6_000.0, 5.0, 700)
    # Nothing past the skip: NaN, not a figure made of the warm points.
    assert all(math.isnan(v) for v in figures["adaptive:100"][0])
    assert all(math.isnan(v) for v in figures["fixed:512"][1])


def figures_of(table):
    """{setup: {cycle: (goodput, p99, limit)}} from {setup: [goodput per cycle]},
    a p99 of 10 ms throughout."""
    return {setup: {c: (g, 10.0, 0) for c, g in enumerate(gs)} for setup, gs in table.items()}


def test_the_warm_up_cycle_and_cycles_missing_a_turn_are_not_counted():
    figures = figures_of({"fixed:512": [1, 2, 3, 4, float("nan")],
                          "off": [1, 2, 3, 4, 5]})
    figures["off"][5] = (6, 10.0, 0)
    assert report.complete_cycles(figures) == [1, 2, 3]
    # A turn that answered nothing cannot be a ratio's denominator.
    figures["fixed:512"][2] = (0.0, 10.0, 0)
    assert report.complete_cycles(figures) == [1, 3]


def test_the_reference_is_cross_fitted_and_ratios_are_cycle_by_cycle():
    nan = float("nan")
    figures = figures_of({
        # 512 wins the even cycles, 1024 the odd ones.
        "fixed:512": [50, 90, 110, 90, 110, nan],
        "fixed:1024": [50, 100, 100, 100, 100, 100],
        "adaptive:100": [10, 95, 99, 95, 99, 95],
    })
    ratios, picked = report.cross_fitted(figures, 0, ["fixed:512", "fixed:1024"])
    # The odd cycles (1, 3) are judged against the even cycles' best
    # (512), the even ones (2, 4) against the odd cycles' best (1024);
    # cycle 5 lacks a turn of 512 and cycle 0 is the warm-up.
    assert picked == ["fixed:1024", "fixed:512"]
    assert ratios["adaptive:100"] == pytest.approx([99 / 100, 99 / 100, 95 / 90, 95 / 90])
    assert ratios["fixed:1024"] == pytest.approx([1, 1, 100 / 90, 100 / 90])


def test_quartiles_need_two_values():
    assert report.quartiles([1.0]) == "-"
    assert report.quartiles([0.9, 1.0, 1.1, 1.2, 1.3]) == "1.00-1.20"


def test_a_cell_is_clear_only_when_its_quartiles_agree():
    assert report.clearly([0.96, 0.97, 1.0, 1.02], 1.1) == "met"
    assert report.clearly([0.96, 0.97, 1.0, 1.02], 1.6) == "missed"
    assert report.clearly([0.80, 0.85, 0.90, 0.93], 1.0) == "missed"
    assert report.clearly([0.88, 0.93, 0.99, 1.04], 1.0) is None
    assert report.clearly([1.0], 1.0) is None


def steady_run(rates, tick=0.05):
    """Points every `tick` s from 0 to 30 s, answering at rates[i] records/s
    while t lies in the i-th (start, end, rate) stretch."""
    points, published, t = [], 0.0, 0.0
    while t < 30.0 - 1e-9:
        t = round(t + tick, 6)
        rate = next(r for start, end, r in rates if start < t <= end + 1e-9)
        published += rate * tick
        points.append({"t": t, "published": published, "p99_ms": 1.0, "limit": 100})
    return points


def test_a_throttled_swing_settles_in_one_second_windows_where_half_seconds_do_not():
    # After the step at 15 s: 100 ms periods alternating 300k and 100k
    # records/s (a mean of 200k), as a CPU quota's runs and stops do.
    rates = [(0.0, 15.0, 400_000.0)]
    t = 15.0
    while t < 30.0:
        rates.append((round(t, 6), round(t + 0.05, 6), 300_000.0))
        rates.append((round(t + 0.05, 6), round(t + 0.1, 6), 100_000.0))
        t = round(t + 0.1, 6)
    points = steady_run(rates)
    settled, swing = report.smoothed_settle(points, 15.0)
    assert settled == 0.0
    assert swing < 0.01


def test_one_second_windows_time_a_slow_descent_and_see_a_late_dip():
    # From 400k down to 200k over 3 s after the step, then flat.
    rates = [(0.0, 15.0, 400_000.0)]
    for i in range(30):
        start = 15.0 + i * 0.1
        rates.append((round(start, 6), round(start + 0.1, 6), 400_000.0 - (i + 1) * 200_000.0 / 30))
    rates.append((18.0, 30.0, 200_000.0))
    settled, _ = report.smoothed_settle(steady_run(rates), 15.0)
    # A window starting at t holds [t, t+1]: within 10% of 200k (at most
    # 220k on average) from a start about 2.2 s after the step, where the
    # descent's last 0.8 s average some 225k and the flat 0.2 s 200k.
    assert 2.1 <= settled <= 2.4, settled
    # A dip in the final half is inside the level it sets: not settled.
    rates = [(0.0, 15.0, 400_000.0), (15.0, 25.0, 200_000.0), (25.0, 26.0, 50_000.0),
             (26.0, 30.0, 200_000.0)]
    settled, swing = report.smoothed_settle(steady_run(rates), 15.0)
    assert settled == report.NEVER
    assert swing > 0.5
