//! Little's law over windows of N messages served (seed 004, section 4.2):
//! after every N messages the window gives the mean time a message spent
//! in flight (W), the rate messages were served at (λ, N over the window's
//! duration), and from them the number in flight, L = λW. The estimate of L
//! does not need the limit: it says how much of the limit is in use.

/// One window's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Messages served in the window.
    pub served: u64,
    /// λ: messages per second.
    pub throughput: f64,
    /// W: mean nanoseconds from admission to completion.
    pub latency_ns: f64,
    /// L = λW: messages in flight on average.
    pub in_flight: f64,
}

/// Windows of `every` messages.
#[derive(Debug, Clone)]
pub struct LittleWindow {
    every: u64,
    min_span_ns: u64,
    count: u64,
    latency_sum_ns: u128,
    started_ns: Option<u64>,
}

impl LittleWindow {
    /// A measurement every `every` messages (at least 1).
    pub fn new(every: u64) -> Self {
        Self {
            every: every.max(1),
            min_span_ns: 0,
            count: 0,
            latency_sum_ns: 0,
            started_ns: None,
        }
    }

    /// The same windows, each also at least `min_span_ns` long: at a high
    /// rate N messages pass in a millisecond or two, too short a span to
    /// say anything but noise.
    pub fn with_min_span(mut self, min_span_ns: u64) -> Self {
        self.min_span_ns = min_span_ns;
        self
    }

    /// Marks where the first window starts (when messages start flowing);
    /// without it the first message served starts it.
    pub fn start(&mut self, now_ns: u64) {
        self.started_ns.get_or_insert(now_ns);
    }

    /// One message served at `now_ns`, `latency_ns` after it was admitted;
    /// answers a measurement when the window is full.
    pub fn served(&mut self, latency_ns: u64, now_ns: u64) -> Option<Measurement> {
        self.served_many(1, latency_ns, now_ns)
    }

    /// `count` messages served together at `now_ns` (a produce request's
    /// records), each `latency_ns` after it was admitted; answers a
    /// measurement when the window is full (a batch is never split, so a
    /// window may hold a little more than N).
    pub fn served_many(&mut self, count: u64, latency_ns: u64, now_ns: u64) -> Option<Measurement> {
        let started = *self.started_ns.get_or_insert(now_ns);
        self.count += count;
        self.latency_sum_ns += u128::from(latency_ns) * u128::from(count);
        if self.count == 0 {
            return None;
        }
        if self.count < self.every || now_ns.saturating_sub(started) < self.min_span_ns {
            return None;
        }
        let secs = now_ns.saturating_sub(started) as f64 / 1e9;
        let latency_ns = self.latency_sum_ns as f64 / self.count as f64;
        let throughput = if secs > 0.0 {
            self.count as f64 / secs
        } else {
            f64::INFINITY
        };
        let measurement = Measurement {
            served: self.count,
            throughput,
            latency_ns,
            in_flight: if throughput.is_finite() {
                throughput * latency_ns / 1e9
            } else {
                0.0
            },
        };
        self.count = 0;
        self.latency_sum_ns = 0;
        self.started_ns = Some(now_ns);
        Some(measurement)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_window_lasts_at_least_its_min_span() {
        let mut window = LittleWindow::new(2).with_min_span(100 * MS);
        window.start(0);
        assert_eq!(window.served_many(5, MS, 10 * MS), None);
        let m = window
            .served_many(5, MS, 100 * MS)
            .expect("N passed and 100 ms");
        assert_eq!(m.served, 10);
        assert!((m.throughput - 100.0).abs() < 1e-9, "{m:?}");
    }

    #[test]
    fn a_window_of_n_gives_lambda_w_and_l() {
        let mut window = LittleWindow::new(4);
        window.start(0);
        // One message every 10 ms, each 20 ms in flight: two in flight.
        for i in 1..4 {
            assert_eq!(window.served(20 * MS, i * 10 * MS), None);
        }
        let m = window.served(20 * MS, 40 * MS).expect("a window of 4");
        assert_eq!(m.served, 4);
        assert!((m.throughput - 100.0).abs() < 1e-9, "{m:?}");
        assert!((m.latency_ns - 20e6).abs() < 1e-3, "{m:?}");
        assert!((m.in_flight - 2.0).abs() < 1e-9, "{m:?}");
        // The next window starts where this one ended.
        for i in 5..8 {
            assert_eq!(window.served(10 * MS, i * 5 * MS + 20 * MS), None);
        }
        let m = window.served(10 * MS, 60 * MS).expect("the second window");
        assert!((m.throughput - 200.0).abs() < 1e-9, "{m:?}");
        assert!((m.in_flight - 2.0).abs() < 1e-9, "{m:?}");
    }
}
