//! Controllers of an in-flight limit: each takes the measurement of a
//! window (see [`crate::window`]) and answers the limit for the next.
//!
//! Seed 004's two algorithms move the limit by steps of `delta`, and only
//! while the estimated number in flight L is at least 80% of the limit:
//! below that the broker is not using what it has, and the measurements
//! say nothing about a larger limit. The seed left their thresholds open;
//! the values chosen here are in [`LastThreePoints::COLLINEAR_TOLERANCE`]
//! and [`Adaptive::DEFAULT_HIGH`] / [`Adaptive::DEFAULT_MEDIUM`], in units
//! relative to the measurements' own size so that they hold at any scale.
//! Until each has the history its rules read (three and five windows), it
//! raises the limit by `delta` per window, as the seed's start does.

use std::collections::VecDeque;

use crate::window::Measurement;

/// Share of the limit L must reach before the seed's algorithms move it.
pub const UTILIZATION_GATE: f64 = 0.8;

/// What every controller does.
pub trait LimitController {
    /// Its name, in reports.
    fn name(&self) -> &'static str;
    /// The limit in force.
    fn limit(&self) -> u32;
    /// Takes a window's measurement; answers the new limit.
    fn observe(&mut self, measurement: &Measurement) -> u32;
}

/// The bounds and step every controller shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The first limit.
    pub initial: u32,
    /// The smallest limit.
    pub min: u32,
    /// The largest limit.
    pub max: u32,
    /// The step (the seed's delta).
    pub delta: u32,
}

impl Sample {
    fn clamp(&self, limit: i64) -> u32 {
        limit.clamp(i64::from(self.min.max(1)), i64::from(self.max.max(1))) as u32
    }
}

fn gated(measurement: &Measurement, limit: u32) -> bool {
    measurement.in_flight < UTILIZATION_GATE * f64::from(limit)
}

/// Seed 004's Last Three Points: the last three mean latencies a, b, c
/// (oldest first) decide, whether they lie on a line or not.
#[derive(Debug, Clone)]
pub struct LastThreePoints {
    bounds: Sample,
    limit: u32,
    latencies: VecDeque<f64>,
}

/// What Last Three Points decided, in steps of delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreePointRule {
    /// 1(a): collinear, rising: past the optimum.
    CollinearRising,
    /// 1(b), 1(c), 1(d): collinear and flat or falling: probe higher.
    CollinearFlatOrFalling,
    /// 2(a): a sudden fall (and a = b > c, a fall the seed does not name).
    SuddenFall,
    /// 2(b), 2(d): a fluctuation: wait.
    Fluctuation,
    /// 2(c): rising too steeply.
    SteepRise,
}

impl ThreePointRule {
    /// The change of the limit, in deltas.
    pub fn steps(self) -> i64 {
        match self {
            ThreePointRule::CollinearRising => -1,
            ThreePointRule::CollinearFlatOrFalling => 1,
            ThreePointRule::SuddenFall => 2,
            ThreePointRule::Fluctuation => 0,
            ThreePointRule::SteepRise => -2,
        }
    }
}

impl LastThreePoints {
    /// Three latencies lie on a line when the second step differs from the
    /// first by at most this share of the largest of them (the seed does
    /// not say how exact; measured latencies are never exactly collinear).
    pub const COLLINEAR_TOLERANCE: f64 = 0.05;

    /// A controller starting at `bounds.initial`.
    pub fn new(bounds: Sample) -> Self {
        Self {
            limit: bounds.clamp(i64::from(bounds.initial)),
            bounds,
            latencies: VecDeque::with_capacity(3),
        }
    }

    /// The rule three latencies (oldest first) fall under.
    pub fn rule(a: f64, b: f64, c: f64) -> ThreePointRule {
        let scale = a.max(b).max(c).abs().max(f64::MIN_POSITIVE);
        let collinear = ((c - b) - (b - a)).abs() <= Self::COLLINEAR_TOLERANCE * scale;
        if collinear {
            if a < b && b < c {
                ThreePointRule::CollinearRising
            } else {
                ThreePointRule::CollinearFlatOrFalling
            }
        } else if a > b && b >= c {
            ThreePointRule::SuddenFall
        } else if a > b {
            ThreePointRule::Fluctuation
        } else if b < c {
            ThreePointRule::SteepRise
        } else if a < b {
            ThreePointRule::Fluctuation
        } else {
            ThreePointRule::SuddenFall
        }
    }
}

impl LimitController for LastThreePoints {
    fn name(&self) -> &'static str {
        "last-three-points"
    }

    fn limit(&self) -> u32 {
        self.limit
    }

    fn observe(&mut self, measurement: &Measurement) -> u32 {
        if self.latencies.len() == 3 {
            self.latencies.pop_front();
        }
        self.latencies.push_back(measurement.latency_ns);
        let steps = if self.latencies.len() < 3 {
            1
        } else if gated(measurement, self.limit) {
            0
        } else {
            Self::rule(self.latencies[0], self.latencies[1], self.latencies[2]).steps()
        };
        self.limit = self
            .bounds
            .clamp(i64::from(self.limit) + steps * i64::from(self.bounds.delta));
        self.limit
    }
}

/// Seed 004's Adaptive: the slopes of throughput and latency over the last
/// five windows, by least squares, decide.
#[derive(Debug, Clone)]
pub struct Adaptive {
    bounds: Sample,
    limit: u32,
    high: f64,
    medium: f64,
    points: VecDeque<(f64, f64)>,
}

impl Adaptive {
    /// Windows the slopes are taken over (the seed's five).
    pub const POINTS: usize = 5;
    /// S_high: a slope of 5% of the points' mean per window.
    pub const DEFAULT_HIGH: f64 = 0.05;
    /// S_medium: 2% of the mean per window.
    pub const DEFAULT_MEDIUM: f64 = 0.02;

    /// A controller starting at `bounds.initial`, with the default
    /// thresholds.
    pub fn new(bounds: Sample) -> Self {
        Self::with_thresholds(bounds, Self::DEFAULT_HIGH, Self::DEFAULT_MEDIUM)
    }

    /// With thresholds of its own (relative slopes per window).
    pub fn with_thresholds(bounds: Sample, high: f64, medium: f64) -> Self {
        Self {
            limit: bounds.clamp(i64::from(bounds.initial)),
            bounds,
            high,
            medium,
            points: VecDeque::with_capacity(Self::POINTS),
        }
    }

    /// The change of the limit, in deltas, for slopes of throughput and
    /// latency (relative, per window).
    pub fn steps(&self, throughput: f64, latency: f64) -> i64 {
        let (high, medium) = (self.high, self.medium);
        if throughput > high {
            if latency < -high {
                3
            } else if latency < 0.0 {
                2
            } else if latency < medium {
                1
            } else if latency <= high {
                0
            } else {
                -1
            }
        } else if throughput < -high {
            -1
        } else if latency < -high {
            1
        } else if latency > high {
            -1
        } else {
            0
        }
    }
}

/// The least-squares slope of `values` against 0, 1, 2, ..., divided by
/// their mean: the change per window as a share of their size.
pub fn relative_slope(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    if values.len() < 2 {
        return 0.0;
    }
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = values.iter().sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (i, y) in values.iter().enumerate() {
        let dx = i as f64 - mean_x;
        num += dx * (y - mean_y);
        den += dx * dx;
    }
    if den == 0.0 || mean_y == 0.0 {
        return 0.0;
    }
    num / den / mean_y.abs()
}

impl LimitController for Adaptive {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn limit(&self) -> u32 {
        self.limit
    }

    fn observe(&mut self, measurement: &Measurement) -> u32 {
        if self.points.len() == Self::POINTS {
            self.points.pop_front();
        }
        self.points
            .push_back((measurement.throughput, measurement.latency_ns));
        let steps = if self.points.len() < Self::POINTS {
            1
        } else if gated(measurement, self.limit) {
            0
        } else {
            let throughputs: Vec<f64> = self.points.iter().map(|p| p.0).collect();
            let latencies: Vec<f64> = self.points.iter().map(|p| p.1).collect();
            self.steps(relative_slope(&throughputs), relative_slope(&latencies))
        };
        self.limit = self
            .bounds
            .clamp(i64::from(self.limit) + steps * i64::from(self.bounds.delta));
        self.limit
    }
}

/// A gradient controller of the kind Envoy's adaptive concurrency filter
/// uses: the limit follows the ratio of a baseline latency, measured with
/// the limit pinned low, to the recent one, plus a small queue allowance,
/// smoothed. Recent latency within [`Gradient::TOLERANCE`] of the
/// baseline lets the limit grow; above it, the limit shrinks, so it
/// settles just past the knee, where more in flight only adds queueing.
///
/// Why a measured baseline: the first version (Netflix's Gradient2 rule)
/// compared against a long-run average of the latency, which follows the
/// limit up: past the knee latency grows with the limit in flight (Little's
/// law at a fixed throughput), the average grows with it, and the limit
/// kept climbing (1,100 to 2,200 records where a fixed 256 did best,
/// docs/flow-control.md, fourth pass). Every [`Gradient::PROBE_EVERY`]
/// windows the limit is pinned at its minimum until
/// [`Gradient::PROBE_WINDOWS`] windows have run with no more in flight
/// than the pinned limit allows (what the higher limit admitted drains
/// first, and a window still holding it would inflate the baseline), at
/// most [`Gradient::PROBE_MAX_WINDOWS`], and the lowest latency of those
/// windows becomes the baseline; then the limit returns to where it was.
///
/// The recent latency is the median of the last three windows', not the
/// last window's alone: on a disk whose fsyncs stall now and then, one
/// slow window would cut the limit.
#[derive(Debug, Clone)]
pub struct Gradient {
    bounds: Sample,
    limit: f64,
    baseline: Option<f64>,
    recent: VecDeque<f64>,
    phase: Phase,
}

/// Where a gradient controller is between its probes.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// Pinned at the minimum: `left` more drained windows wanted, `tries`
    /// more windows at most, the lowest latency of a drained window so far
    /// and of any window, and the limit to return to.
    Probing {
        left: u32,
        tries: u32,
        lowest: f64,
        lowest_any: f64,
        resume_at: f64,
    },
    /// Steering; `until_probe` windows before the next probe.
    Steering { until_probe: u32 },
}

impl Gradient {
    /// Recent latency may exceed the baseline by this factor before the
    /// limit shrinks (Envoy's default buffer is 25%).
    pub const TOLERANCE: f64 = 1.25;
    /// The gradient's bounds: at most halving, at most doubling the
    /// estimate per window (before smoothing).
    pub const GRADIENT_RANGE: (f64, f64) = (0.5, 2.0);
    /// Weight of the newest estimate against the limit in force.
    pub const SMOOTHING: f64 = 0.2;
    /// Windows whose median is the recent latency.
    pub const RECENT_WINDOWS: usize = 3;
    /// Windows between probes (about 30 s at the gate's 50 ms shortest
    /// window: a probe costs well under 1% of the time).
    pub const PROBE_EVERY: u32 = 600;
    /// Drained windows a probe measures at the minimum.
    pub const PROBE_WINDOWS: u32 = 3;
    /// Most windows a probe holds the limit at its minimum: if what was in
    /// flight has not drained by then, the probe ends with what it has.
    pub const PROBE_MAX_WINDOWS: u32 = 12;
    /// A probe window has drained when its mean in flight (L) is at most
    /// this many times the pinned limit (L is an estimate, λW).
    pub const DRAINED: f64 = 1.5;

    /// A controller starting at `bounds.initial`; its first window
    /// starts a probe (the limit in force until then is the one asked for).
    pub fn new(bounds: Sample) -> Self {
        Self {
            limit: f64::from(bounds.clamp(i64::from(bounds.initial))),
            bounds,
            baseline: None,
            recent: VecDeque::with_capacity(Self::RECENT_WINDOWS),
            phase: Phase::Steering { until_probe: 1 },
        }
    }

    /// The baseline latency the last probe measured, in nanoseconds.
    pub fn baseline_ns(&self) -> Option<f64> {
        self.baseline
    }

    fn floor(&self) -> f64 {
        f64::from(self.bounds.min.max(1))
    }

    /// The median of the last windows' latencies (with two, their mean).
    fn recent_latency(&mut self, latest: f64) -> f64 {
        if self.recent.len() == Self::RECENT_WINDOWS {
            self.recent.pop_front();
        }
        self.recent.push_back(latest);
        let mut sorted: Vec<f64> = self.recent.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        match sorted.len() {
            2 => (sorted[0] + sorted[1]) / 2.0,
            n => sorted[n / 2],
        }
    }

    fn steer(&mut self, measurement: &Measurement, baseline: f64) {
        let recent = self.recent_latency(measurement.latency_ns.max(1.0));
        let (low, high) = Self::GRADIENT_RANGE;
        let gradient = (Self::TOLERANCE * baseline / recent).clamp(low, high);
        let queue = self.limit.sqrt().max(1.0);
        let mut next = self.limit * gradient + queue;
        // An application that does not use its limit says nothing about a
        // larger one: no growth then.
        if measurement.in_flight < self.limit / 2.0 {
            next = next.min(self.limit);
        }
        self.limit = self.limit * (1.0 - Self::SMOOTHING) + next * Self::SMOOTHING;
        self.limit = self
            .limit
            .clamp(self.floor(), f64::from(self.bounds.max.max(1)));
    }
}

impl LimitController for Gradient {
    fn name(&self) -> &'static str {
        "gradient"
    }

    fn limit(&self) -> u32 {
        match self.phase {
            Phase::Probing { .. } => self.bounds.clamp(i64::from(self.bounds.min)),
            Phase::Steering { .. } => self.bounds.clamp(self.limit.round() as i64),
        }
    }

    fn observe(&mut self, measurement: &Measurement) -> u32 {
        let latency = measurement.latency_ns.max(1.0);
        self.phase = match self.phase.clone() {
            Phase::Probing {
                left,
                tries,
                lowest,
                lowest_any,
                resume_at,
            } => {
                let pinned = f64::from(self.bounds.clamp(i64::from(self.bounds.min)));
                let drained = measurement.in_flight <= pinned * Self::DRAINED;
                let (left, lowest) = if drained {
                    (left.saturating_sub(1), lowest.min(latency))
                } else {
                    (left, lowest)
                };
                let lowest_any = lowest_any.min(latency);
                if left > 0 && tries > 1 {
                    Phase::Probing {
                        left,
                        tries: tries - 1,
                        lowest,
                        lowest_any,
                        resume_at,
                    }
                } else {
                    // Nothing drained in time (the load itself holds more
                    // in flight than the minimum, or the windows are too
                    // short to drain it): the previous baseline, if any,
                    // is better than an inflated one.
                    self.baseline = Some(if lowest.is_finite() {
                        lowest
                    } else {
                        self.baseline.unwrap_or(lowest_any)
                    });
                    self.limit = resume_at;
                    // The windows before the probe are stale against the
                    // new baseline: the median starts again.
                    self.recent.clear();
                    Phase::Steering {
                        until_probe: Self::PROBE_EVERY,
                    }
                }
            }
            Phase::Steering { until_probe } => {
                if let Some(baseline) = self.baseline {
                    self.steer(measurement, baseline);
                }
                if until_probe <= 1 {
                    Phase::Probing {
                        left: Self::PROBE_WINDOWS,
                        tries: Self::PROBE_MAX_WINDOWS,
                        lowest: f64::INFINITY,
                        lowest_any: f64::INFINITY,
                        resume_at: self.limit,
                    }
                } else {
                    Phase::Steering {
                        until_probe: until_probe - 1,
                    }
                }
            }
        };
        self.limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Sample = Sample {
        initial: 200,
        min: 10,
        max: 10_000,
        delta: 20,
    };

    fn window(throughput: f64, latency_ms: f64, in_flight: f64) -> Measurement {
        Measurement {
            served: 1000,
            throughput,
            latency_ns: latency_ms * 1e6,
            in_flight,
        }
    }

    #[test]
    fn each_last_three_points_rule_gives_the_seeds_decision() {
        use ThreePointRule::*;
        // 1. collinear
        assert_eq!(LastThreePoints::rule(1.0, 2.0, 3.0), CollinearRising); // 1(a)
        assert_eq!(
            LastThreePoints::rule(10.0, 10.2, 10.1),
            CollinearFlatOrFalling
        ); // 1(b)
        assert_eq!(LastThreePoints::rule(3.0, 2.0, 1.0), CollinearFlatOrFalling); // 1(c)
        assert_eq!(
            LastThreePoints::rule(10.0, 10.0, 10.3),
            CollinearFlatOrFalling
        ); // 1(d)
           // 2. not collinear
        assert_eq!(LastThreePoints::rule(10.0, 5.0, 4.0), SuddenFall); // 2(a)
        assert_eq!(LastThreePoints::rule(10.0, 5.0, 9.0), Fluctuation); // 2(b)
        assert_eq!(LastThreePoints::rule(5.0, 6.0, 10.0), SteepRise); // 2(c)
        assert_eq!(LastThreePoints::rule(5.0, 5.0, 10.0), SteepRise); // 2(c), a = b
        assert_eq!(LastThreePoints::rule(5.0, 9.0, 6.0), Fluctuation); // 2(d)
        assert_eq!(LastThreePoints::rule(9.0, 9.0, 5.0), SuddenFall); // a = b > c
        assert_eq!(
            [
                CollinearRising,
                CollinearFlatOrFalling,
                SuddenFall,
                Fluctuation,
                SteepRise
            ]
            .map(ThreePointRule::steps),
            [-1, 1, 2, 0, -2]
        );
    }

    #[test]
    fn last_three_points_probes_upward_first_then_follows_the_rules() {
        let mut c = LastThreePoints::new(BOUNDS);
        assert_eq!(c.observe(&window(1000.0, 1.0, 180.0)), 220);
        assert_eq!(c.observe(&window(1000.0, 2.0, 180.0)), 240);
        // Three points now: 1, 2, 3 ms collinear and rising: down a step.
        assert_eq!(c.observe(&window(1000.0, 3.0, 200.0)), 220);
        // 2, 3, 6: rising too steeply: down two steps.
        assert_eq!(c.observe(&window(1000.0, 6.0, 200.0)), 180);
        // Under 80% of the limit in use: no change whatever the latencies.
        assert_eq!(c.observe(&window(1000.0, 1.0, 100.0)), 180);
        // 6, 1, 0.5: a sudden fall: up two steps.
        assert_eq!(c.observe(&window(1000.0, 0.5, 170.0)), 220);
    }

    #[test]
    fn each_adaptive_rule_gives_the_seeds_decision() {
        let c = Adaptive::new(BOUNDS);
        let (high, medium) = (Adaptive::DEFAULT_HIGH, Adaptive::DEFAULT_MEDIUM);
        let rising = high * 2.0;
        // 1. throughput rising fast
        assert_eq!(c.steps(rising, -high * 2.0), 3); // 1(a)
        assert_eq!(c.steps(rising, -0.001), 2); // 1(b)
        assert_eq!(c.steps(rising, medium / 2.0), 1); // 1(c)
        assert_eq!(c.steps(rising, (medium + high) / 2.0), 0); // 1(d)
        assert_eq!(c.steps(rising, high * 2.0), -1); // 1(e)
                                                     // 2. throughput falling fast
        assert_eq!(c.steps(-rising, -high * 2.0), -1);
        // 3. throughput flat
        assert_eq!(c.steps(0.0, -high * 2.0), 1); // 3(a)
        assert_eq!(c.steps(0.0, high * 2.0), -1); // 3(b)
        assert_eq!(c.steps(0.0, medium), 0); // 3(c)
    }

    #[test]
    fn relative_slopes_are_least_squares_over_the_mean() {
        assert_eq!(relative_slope(&[5.0, 5.0, 5.0, 5.0, 5.0]), 0.0);
        // 1..5: slope 1 per window over a mean of 3.
        assert!((relative_slope(&[1.0, 2.0, 3.0, 4.0, 5.0]) - 1.0 / 3.0).abs() < 1e-12);
        assert!((relative_slope(&[10.0, 8.0, 6.0, 4.0, 2.0]) + 2.0 / 6.0).abs() < 1e-12);
    }

    #[test]
    fn adaptive_warms_up_then_raises_while_throughput_climbs_at_flat_latency() {
        let mut c = Adaptive::new(BOUNDS);
        for (i, expected) in [220, 240, 260, 280].into_iter().enumerate() {
            assert_eq!(c.observe(&window(1000.0 + i as f64, 5.0, 190.0)), expected);
        }
        // Fifth point: throughput up 20% a window, latency flat: 1(b)? The
        // latency slope is exactly 0, not below it: 1(c), up one step.
        let mut c = Adaptive::new(BOUNDS);
        let mut limit = 0;
        for i in 0..5 {
            limit = c.observe(&window(1000.0 * (1.0 + 0.2 * i as f64), 5.0, 250.0));
        }
        assert_eq!(limit, 200 + 4 * 20 + 20);
        // Latency now climbs 30% a window at flat throughput: down.
        let mut c = Adaptive::new(BOUNDS);
        for i in 0..5 {
            limit = c.observe(&window(1000.0, 5.0 * (1.0 + 0.3 * i as f64), 250.0));
        }
        assert_eq!(limit, 200 + 4 * 20 - 20);
    }

    /// The limit a steering window moves `limit` to, by the rule.
    fn steered(limit: f64, gradient: f64) -> f64 {
        limit * 0.8 + (limit * gradient + limit.sqrt()) * 0.2
    }

    #[test]
    fn the_gradient_controller_probes_for_its_baseline_first() {
        let mut c = Gradient::new(BOUNDS);
        assert_eq!(c.limit(), 200, "the limit asked for, until a window");
        // Its first window starts the probe: pinned at its minimum (10)
        // for three windows; the lowest latency of the three is the
        // baseline, and the limit returns to 200.
        assert_eq!(c.observe(&window(1000.0, 1.0, 200.0)), 10);
        assert_eq!(c.observe(&window(1000.0, 9.0, 10.0)), 10);
        assert_eq!(c.observe(&window(1000.0, 4.0, 10.0)), 10);
        assert_eq!(c.baseline_ns(), None);
        assert_eq!(c.observe(&window(1000.0, 5.0, 10.0)), 200);
        assert_eq!(c.baseline_ns(), Some(4e6));
    }

    #[test]
    fn a_probe_waits_for_what_the_higher_limit_admitted_to_drain() {
        let mut c = Gradient::new(BOUNDS);
        assert_eq!(c.observe(&window(1000.0, 1.0, 200.0)), 10);
        // Two windows still carry the 200 in flight before the probe
        // (L = 150, 40: above 1.5 x 10), slow from their queueing: not the
        // baseline, and the probe runs three drained windows past them.
        assert_eq!(c.observe(&window(1000.0, 150.0, 150.0)), 10);
        assert_eq!(c.observe(&window(1000.0, 40.0, 40.0)), 10);
        assert_eq!(c.observe(&window(1000.0, 6.0, 12.0)), 10);
        assert_eq!(c.observe(&window(1000.0, 3.0, 10.0)), 10);
        assert_eq!(c.baseline_ns(), None);
        assert_eq!(c.observe(&window(1000.0, 4.0, 10.0)), 200);
        assert_eq!(c.baseline_ns(), Some(3e6));
        // A load that never drains to the minimum ends the probe after
        // PROBE_MAX_WINDOWS, keeping no inflated baseline: with none
        // before, the lowest of all its windows.
        let mut c = Gradient::new(BOUNDS);
        c.observe(&window(1000.0, 1.0, 200.0));
        for n in 0..Gradient::PROBE_MAX_WINDOWS - 1 {
            assert_eq!(c.observe(&window(1000.0, 50.0 + f64::from(n), 50.0)), 10);
        }
        assert_eq!(c.observe(&window(1000.0, 70.0, 50.0)), 200);
        assert_eq!(c.baseline_ns(), Some(50e6));
    }

    #[test]
    fn the_gradient_controller_grows_near_its_baseline_and_shrinks_past_it() {
        let mut c = Gradient::new(BOUNDS);
        for _ in 0..4 {
            c.observe(&window(1000.0, 4.0, 10.0));
        }
        // At the baseline: 1.25 x 4 / 4, the estimate grows by a quarter
        // plus the allowance, a fifth of that taken.
        let grown = steered(200.0, 1.25);
        assert_eq!(c.observe(&window(1000.0, 4.0, 200.0)), grown.round() as u32);
        // Twice the baseline (a median of three windows: two are needed):
        // the gradient is 1.25 x 4 / 8 = 0.625.
        let held = c.observe(&window(1000.0, 8.0, grown));
        let expected = steered(steered(grown, 1.25 * 4.0 / 6.0), 0.625);
        let shrunk = c.observe(&window(1000.0, 8.0, f64::from(held)));
        assert!(
            (f64::from(shrunk) - expected).abs() <= 1.0,
            "{shrunk} vs {expected}"
        );
        assert!(shrunk < grown.round() as u32);
        // One slow window among fast ones does not cut it.
        let mut c = Gradient::new(BOUNDS);
        for _ in 0..4 {
            c.observe(&window(1000.0, 4.0, 10.0));
        }
        c.observe(&window(1000.0, 4.0, 200.0));
        let before = c.observe(&window(1000.0, 4.0, 250.0));
        let spiked = c.observe(&window(1000.0, 30.0, 250.0));
        assert!(spiked >= before, "{spiked} < {before}");
        // Unused limit does not grow.
        let idle = c.observe(&window(10.0, 4.0, 1.0));
        assert!(idle <= spiked, "{idle} > {spiked}");
    }

    #[test]
    fn the_gradient_controller_probes_again_and_returns_to_its_limit() {
        let mut c = Gradient::new(BOUNDS);
        for _ in 0..4 {
            c.observe(&window(1000.0, 4.0, 10.0));
        }
        // Latency exactly at the tolerance: the gradient is 1, the
        // estimate grows by its allowance only.
        let mut limit = 200;
        for _ in 0..Gradient::PROBE_EVERY - 1 {
            limit = c.observe(&window(1000.0, 5.0, f64::from(limit)));
        }
        assert!(limit > 200);
        // The 600th window still steers (one more allowance), then the
        // probe pins the minimum for three windows, finds a lower
        // baseline, and the limit returns to where it was.
        let pinned = c.observe(&window(1000.0, 5.0, f64::from(limit)));
        assert_eq!(pinned, 10, "the probe pins the minimum");
        assert_eq!(c.observe(&window(1000.0, 9.0, 10.0)), 10, "draining");
        assert_eq!(c.observe(&window(1000.0, 2.0, 10.0)), 10);
        let after = c.observe(&window(1000.0, 3.0, 10.0));
        let expected = steered(f64::from(limit), 1.0);
        assert!(
            (f64::from(after) - expected).abs() <= 1.0,
            "{after} vs {expected}"
        );
        assert_eq!(c.baseline_ns(), Some(2e6));
    }

    #[test]
    fn limits_stay_within_their_bounds() {
        let bounds = Sample {
            initial: 15,
            min: 10,
            max: 30,
            delta: 20,
        };
        let mut c = LastThreePoints::new(bounds);
        assert_eq!(c.observe(&window(1.0, 1.0, 15.0)), 30);
        let mut c = Adaptive::new(bounds);
        assert_eq!(c.observe(&window(1.0, 1.0, 15.0)), 30);
        // The gradient controller's probe pins the minimum; after it, far
        // below the baseline, the limit stops at the maximum.
        let mut c = Gradient::new(bounds);
        for _ in 0..3 {
            assert_eq!(c.observe(&window(1.0, 100.0, 10.0)), 10);
        }
        assert_eq!(c.observe(&window(1.0, 100.0, 10.0)), 15);
        for _ in 0..20 {
            assert!(c.observe(&window(1.0, 1.0, 30.0)) <= 30);
        }
        assert_eq!(c.limit(), 30);
    }
}
