//! Failed logins slow down per source address and user name: each
//! failure within the window doubles the delay before the next failure of
//! the same name from the same address is answered (from 100 ms, Kafka's
//! `connection.failed.authentication.delay.ms`, up to 5 s). Guessing one
//! user's password costs ever more time, while a first mistake is told at
//! once and other users behind the same address (a NAT) are not slowed.
//! A success clears the pair. Sans-I/O: the caller gives the time and does
//! the waiting.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The delay of a first failure.
pub const FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest delay.
pub const MAX_DELAY: Duration = Duration::from_secs(5);
/// Failures older than this are forgotten.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Most (address, user) pairs remembered; past it the oldest are
/// forgotten first.
pub const ADDRESSES_MAX: usize = 65_536;

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    last: Instant,
}

/// Recent failed logins by source address and user name.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    by_address: HashMap<(IpAddr, String), Failures>,
}

impl LoginThrottle {
    /// An empty throttle.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a failure of `user` (empty when the message named none)
    /// from `address` at `now`; answers how long to wait before telling
    /// the client.
    pub fn failed(&mut self, address: IpAddr, user: &str, now: Instant) -> Duration {
        let key = (address, user.to_owned());
        if self.by_address.len() >= ADDRESSES_MAX && !self.by_address.contains_key(&key) {
            self.forget_before(now.checked_sub(WINDOW).unwrap_or(now));
            if self.by_address.len() >= ADDRESSES_MAX {
                // Every remembered address failed within the window: drop
                // the one idle longest.
                if let Some(oldest) = self
                    .by_address
                    .iter()
                    .min_by_key(|(_, f)| f.last)
                    .map(|(k, _)| k.clone())
                {
                    self.by_address.remove(&oldest);
                }
            }
        }
        let entry = self.by_address.entry(key).or_insert(Failures {
            count: 0,
            last: now,
        });
        if now.saturating_duration_since(entry.last) > WINDOW {
            entry.count = 0;
        }
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
        FIRST_DELAY
            .saturating_mul(1u32 << (entry.count - 1).min(16))
            .min(MAX_DELAY)
    }

    /// A login of `user` from `address` succeeded.
    pub fn succeeded(&mut self, address: IpAddr, user: &str) {
        self.by_address.remove(&(address, user.to_owned()));
    }

    /// Pairs remembered.
    pub fn len(&self) -> usize {
        self.by_address.len()
    }

    /// True when no pair is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_address.is_empty()
    }

    fn forget_before(&mut self, cutoff: Instant) {
        self.by_address.retain(|_, f| f.last >= cutoff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_per_address_and_user_and_reset() {
        let mut throttle = LoginThrottle::new();
        let t0 = Instant::now();
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        let at = |secs| t0 + Duration::from_secs(secs);
        let delays: Vec<u128> = (0..8)
            .map(|i| throttle.failed(a, "ann", at(i)).as_millis())
            .collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(
            throttle.failed(b, "ann", t0).as_millis(),
            100,
            "another address"
        );
        assert_eq!(
            throttle.failed(a, "bob", t0).as_millis(),
            100,
            "another user"
        );
        assert_eq!(
            throttle.failed(a, "ann", at(200)).as_millis(),
            100,
            "forgotten after the window"
        );
        throttle.failed(a, "ann", at(201));
        throttle.succeeded(a, "ann");
        assert_eq!(throttle.failed(a, "ann", at(202)).as_millis(), 100);
    }

    #[test]
    fn memory_is_bounded() {
        let mut throttle = LoginThrottle::new();
        let t0 = Instant::now();
        for i in 0..(ADDRESSES_MAX as u32 + 10) {
            throttle.failed(IpAddr::from(i.to_be_bytes()), "u", t0);
        }
        assert_eq!(throttle.len(), ADDRESSES_MAX);
    }
}
