//! Quotas and tenant SLAs in force: the shared token buckets every front
//! end (the Kafka listeners, the push gateway) charges, and what a charge
//! decides.
//!
//! One bucket per quota entity, key and rate, shared by every connection
//! of the entity (as Kafka shares its quota sensors), so a tenant's rate
//! holds across all its connections and protocols. A front end resolves
//! its client's buckets once ([`TenantRates::resolve`],
//! [`QuotaBuckets::client_bucket`]) and keeps them while the quotas and
//! tenants stay the same: no map lookup per request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::bucket::{Admission, TokenBucket};
use crate::quotas::{EntityType, QuotaEntity, QuotaState};

/// A tenant's produced (published) bytes per second.
pub const INPUT_BYTES: &str = "input_bytes_per_sec";
/// A tenant's produced (published) records per second.
pub const INPUT_MESSAGES: &str = "input_messages_per_sec";
/// A tenant's fetched or pushed bytes per second.
pub const OUTPUT_BYTES: &str = "output_bytes_per_sec";
/// A tenant's fetched or pushed records per second.
pub const OUTPUT_MESSAGES: &str = "output_messages_per_sec";
/// 1 when the tenant's produces over its input rates are refused.
pub const REJECT_OVER_RATE: &str = "reject_over_rate";
/// Most partitions the topics in a tenant's namespaces may have, summed.
pub const MAX_PARTITIONS: &str = "max_partitions";
/// Most bytes the topics in a tenant's namespaces may hold on disk.
pub const MAX_STORED_BYTES: &str = "max_stored_bytes";
/// Most connections (Kafka and push) a tenant's principals may hold.
pub const MAX_CONNECTIONS: &str = "max_connections";

/// Seconds of its rate a bucket holds: what a client may send at once
/// above the rate, and the idle time it may make up for. Small enough that
/// no one-second window admits more than 1.05x the rate (plus the one
/// request that goes over), large enough that a paused reader waking a few
/// timer ticks late loses nothing.
pub const BURST_SECONDS: f64 = 0.05;

/// The longest a client is paused for one request, as Kafka caps its
/// throttle time at its quota window: one huge request from a client with
/// a small rate must not silence its connection for minutes (its requests
/// would time out, at 30 s by default). What is owed past the cap stays in
/// the bucket, so the next request pauses again and the rate holds.
pub const MAX_PAUSE: Duration = Duration::from_secs(10);

/// Buckets past this count are looked over for idle ones on the next new
/// one (a client chooses its client id, so the map must not only grow).
const PRUNE_AFTER: usize = 4096;

/// A bucket shared by every connection of its entity.
pub type Bucket = Arc<Mutex<TokenBucket>>;

/// Locks a bucket. A panic while one was held cannot leave it torn (every
/// change is one assignment), so a poisoned lock is used as it is.
pub fn lock(bucket: &Bucket) -> MutexGuard<'_, TokenBucket> {
    bucket.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every quota entity's buckets, and the monotonic clock they run on.
#[derive(Debug)]
pub struct QuotaBuckets {
    /// `None`: a clock that moves only when advanced.
    epoch: Option<Instant>,
    /// Added to the real clock (tests move time with it).
    skew_ns: AtomicU64,
    buckets: Mutex<BucketMap>,
}

#[derive(Debug, Default)]
struct BucketMap {
    by_entity: HashMap<(QuotaEntity, &'static str, u64), Bucket>,
    prune_at: usize,
}

impl Default for QuotaBuckets {
    fn default() -> Self {
        Self {
            epoch: Some(Instant::now()),
            skew_ns: AtomicU64::new(0),
            buckets: Mutex::new(BucketMap {
                by_entity: HashMap::new(),
                prune_at: PRUNE_AFTER,
            }),
        }
    }
}

impl QuotaBuckets {
    /// Buckets on a clock that stands still until [`QuotaBuckets::advance`]
    /// moves it: tests of the front ends expect exact pauses with it.
    pub fn frozen() -> Self {
        Self {
            epoch: None,
            ..Self::default()
        }
    }

    /// Nanoseconds since the buckets were made: the clock every bucket
    /// here is charged on.
    pub fn now_ns(&self) -> u64 {
        let skew = self.skew_ns.load(Ordering::Relaxed);
        let real = self.epoch.map_or(0, |epoch| {
            u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
        });
        real.saturating_add(skew)
    }

    /// Moves this clock forward by `by`, so that tests of the front ends
    /// can refill buckets without sleeping. Nothing else calls it.
    pub fn advance(&self, by: Duration) {
        let ns = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.skew_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The bucket of `entity`'s `key` at `rate` units per second. A rate
    /// change makes a new bucket; a new bucket starts empty, so a client's
    /// first second is held to the rate where Kafka's windowed rate admits
    /// a burst.
    pub fn bucket(&self, entity: QuotaEntity, key: &'static str, rate: f64) -> Bucket {
        self.bucket_shaped(entity, key, rate, BURST_SECONDS, false)
    }

    fn bucket_shaped(
        &self,
        entity: QuotaEntity,
        key: &'static str,
        rate: f64,
        burst_seconds: f64,
        starts_full: bool,
    ) -> Bucket {
        let rate = rate.max(1.0) as u64;
        let now = self.now_ns();
        let mut map = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if map.by_entity.len() >= map.prune_at {
            // A full bucket nobody holds is the same as a new one: dropping
            // it lets no one through faster.
            map.by_entity.retain(|_, bucket| {
                Arc::strong_count(bucket) > 1 || {
                    let b = lock(bucket);
                    b.available(now) < b.burst()
                }
            });
            map.prune_at = (map.by_entity.len() * 2).max(PRUNE_AFTER);
        }
        let bucket = map.by_entity.entry((entity, key, rate)).or_insert_with(|| {
            let burst = ((rate as f64) * burst_seconds).max(1.0) as u64;
            let mut bucket = TokenBucket::new(rate, burst, now);
            if !starts_full {
                bucket.take(burst, now);
            }
            Arc::new(Mutex::new(bucket))
        });
        Arc::clone(bucket)
    }

    /// The bucket of the client quota `key` of (`user`, `client_id`), if
    /// one applies, counting `units_per_value` units per second for each
    /// unit of the quota's value (1 for a byte rate; 10,000,000 ns for
    /// each percent of `request_percentage`). A default entity's quota is
    /// each user's (or client id's) own, as in Kafka, so the bucket is
    /// keyed by the names.
    pub fn client_bucket(
        &self,
        quotas: &QuotaState,
        user: &str,
        client_id: &str,
        key: &'static str,
        units_per_value: f64,
    ) -> Option<Bucket> {
        let (entity, value) = quotas.resolve(user, client_id, key)?;
        let named = QuotaEntity(
            entity
                .0
                .into_keys()
                .map(|kind| {
                    let name = match kind {
                        EntityType::User => user,
                        _ => client_id,
                    };
                    (kind, Some(name.to_owned()))
                })
                .collect(),
        );
        Some(self.bucket(named, key, value * units_per_value))
    }

    /// The bucket of the IP quota `key` (`connection_creation_rate`) of
    /// address `ip`: its own entity's, else the default IP entity's (each
    /// address its own bucket). It holds one second of the rate and starts
    /// full: a client opens a few connections at once (a bootstrap, then
    /// one per broker), which Kafka's windowed rate lets through too.
    pub fn ip_bucket(&self, quotas: &QuotaState, ip: &str, key: &'static str) -> Option<Bucket> {
        let named = QuotaEntity([(EntityType::Ip, Some(ip.to_owned()))].into());
        let default = QuotaEntity([(EntityType::Ip, None)].into());
        let rate = [&named, &default]
            .into_iter()
            .find_map(|entity| quotas.entries.get(entity)?.get(key).copied())?;
        Some(self.bucket_shaped(named, key, rate, 1.0, true))
    }
}

/// Why a request over a tenant's rate was refused (reject mode, or a push
/// publish).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// When the client may try again.
    pub retry_after: Duration,
    /// What to tell it.
    pub message: String,
}

/// What the quotas decided about one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Verdict {
    /// Within every rate.
    #[default]
    Go,
    /// Accepted over a rate: the client is paused this long (Kafka's
    /// `throttle_time_ms`; the front end stops reading or writing that
    /// long too).
    Throttle(Duration),
    /// Refused: nothing was taken.
    Refuse(Refusal),
}

impl Verdict {
    /// The throttle time to answer with, in Kafka's milliseconds.
    pub fn throttle_time_ms(&self) -> i32 {
        let pause = match self {
            Verdict::Go => Duration::ZERO,
            Verdict::Throttle(pause) => *pause,
            Verdict::Refuse(refusal) => refusal.retry_after,
        };
        i32::try_from(pause.as_millis()).unwrap_or(i32::MAX)
    }

    /// The longer pause of two verdicts; a refusal wins.
    pub fn and(self, other: Verdict) -> Verdict {
        match (self, other) {
            (Verdict::Refuse(r), _) | (_, Verdict::Refuse(r)) => Verdict::Refuse(r),
            (Verdict::Throttle(a), Verdict::Throttle(b)) => Verdict::Throttle(a.max(b)),
            (Verdict::Throttle(a), Verdict::Go) | (Verdict::Go, Verdict::Throttle(a)) => {
                Verdict::Throttle(a)
            }
            (Verdict::Go, Verdict::Go) => Verdict::Go,
        }
    }
}

/// A throttle-mode bucket's answer as a verdict, its pause at most
/// [`MAX_PAUSE`].
pub fn throttled(admission: Admission) -> Verdict {
    match admission {
        Admission::Throttled { pause_ns } => {
            Verdict::Throttle(Duration::from_nanos(pause_ns).min(MAX_PAUSE))
        }
        Admission::Admitted | Admission::Rejected { .. } => Verdict::Go,
    }
}

/// Takes `units` from `bucket` in throttle mode (`Go` without a bucket).
pub fn take(bucket: Option<&Bucket>, units: u64, now_ns: u64) -> Verdict {
    bucket.map_or(Verdict::Go, |b| throttled(lock(b).take(units, now_ns)))
}

/// How a tenant's input rates treat a request over them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverRate {
    /// Accept it and pause the client (Kafka's quotas; the default).
    Throttle,
    /// Refuse it with nothing taken and say when to retry (seed 004's
    /// reject mode; a push publish is always answered so).
    Reject,
}

/// One of a tenant's rates, with its bucket.
#[derive(Debug, Clone)]
pub struct Rate {
    /// The bucket.
    pub bucket: Bucket,
    /// Units per second.
    pub per_second: u64,
}

/// A tenant's SLA rates, as one connection of the tenant holds them.
#[derive(Debug, Clone)]
pub struct TenantRates {
    /// The tenant.
    pub name: String,
    /// Whether its produces over an input rate are refused.
    pub reject: bool,
    /// `input_bytes_per_sec`.
    pub input_bytes: Option<Rate>,
    /// `input_messages_per_sec`.
    pub input_messages: Option<Rate>,
    /// `output_bytes_per_sec`.
    pub output_bytes: Option<Rate>,
    /// `output_messages_per_sec`.
    pub output_messages: Option<Rate>,
}

impl TenantRates {
    /// The rates tenant `name` has in `quotas` (`None`: no SLA entry).
    pub fn resolve(buckets: &QuotaBuckets, quotas: &QuotaState, name: &str) -> Option<Self> {
        let entity = QuotaEntity([(EntityType::Tenant, Some(name.to_owned()))].into());
        let values = quotas.entries.get(&entity)?;
        let rate = |key: &'static str| {
            let per_second = *values.get(key)?;
            Some(Rate {
                bucket: buckets.bucket(entity.clone(), key, per_second),
                per_second: per_second as u64,
            })
        };
        Some(Self {
            name: name.to_owned(),
            reject: values.get(REJECT_OVER_RATE).is_some_and(|v| *v >= 1.0),
            input_bytes: rate(INPUT_BYTES),
            input_messages: rate(INPUT_MESSAGES),
            output_bytes: rate(OUTPUT_BYTES),
            output_messages: rate(OUTPUT_MESSAGES),
        })
    }

    /// The tenant's own mode for its input rates.
    pub fn mode(&self) -> OverRate {
        if self.reject {
            OverRate::Reject
        } else {
            OverRate::Throttle
        }
    }

    /// Charges `bytes` and `records` (either may be 0) to the input rates
    /// in `mode`. A refusal takes nothing from either bucket.
    pub fn charge_input(&self, mode: OverRate, bytes: u64, records: u64, now_ns: u64) -> Verdict {
        let charges = [
            (self.input_bytes.as_ref(), "input byte", bytes),
            (self.input_messages.as_ref(), "input message", records),
        ];
        let charges = charges
            .into_iter()
            .filter_map(|(rate, what, units)| Some((rate?, what, units)))
            .filter(|(_, _, units)| *units > 0);
        if mode == OverRate::Throttle {
            return charges.fold(Verdict::Go, |verdict, (rate, _, units)| {
                verdict.and(take(Some(&rate.bucket), units, now_ns))
            });
        }
        // Both buckets are held while deciding, so that a refusal by the
        // second leaves nothing taken from the first (and no other
        // connection of the tenant sees a half-taken charge).
        let charges: Vec<_> = charges.collect();
        let mut held: Vec<_> = charges
            .iter()
            .map(|(rate, _, _)| lock(&rate.bucket))
            .collect();
        for ((rate, what, units), bucket) in charges.iter().zip(held.iter()) {
            let wait_ns = bucket.wait_ns(*units, now_ns);
            if wait_ns > 0 {
                let retry_after = Duration::from_nanos(wait_ns);
                return Verdict::Refuse(Refusal {
                    retry_after,
                    message: format!(
                        "tenant {} is over its {what} rate of {}/s; retry after {} ms",
                        self.name,
                        rate.per_second,
                        retry_after.as_millis().max(1)
                    ),
                });
            }
        }
        for ((_, _, units), bucket) in charges.iter().zip(held.iter_mut()) {
            bucket.try_take(*units, now_ns);
        }
        Verdict::Go
    }

    /// Charges `bytes` and `records` sent to the output rates, always in
    /// throttle mode (what was read cannot be taken back).
    pub fn charge_output(&self, bytes: u64, records: u64, now_ns: u64) -> Verdict {
        let bytes_verdict = take(self.output_bytes.as_ref().map(|r| &r.bucket), bytes, now_ns);
        let records_verdict = if records > 0 {
            take(
                self.output_messages.as_ref().map(|r| &r.bucket),
                records,
                now_ns,
            )
        } else {
            Verdict::Go
        };
        bytes_verdict.and(records_verdict)
    }

    /// Whether an output rate is set (then the records sent are counted).
    pub fn limits_output(&self) -> bool {
        self.output_bytes.is_some() || self.output_messages.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant_quotas(name: &str, values: &[(&str, f64)]) -> QuotaState {
        let mut state = QuotaState::default();
        let entity = QuotaEntity([(EntityType::Tenant, Some(name.to_owned()))].into());
        state.entries.insert(
            entity,
            values.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        );
        state
    }

    #[test]
    fn a_refused_input_charge_takes_nothing_from_either_rate() {
        let buckets = QuotaBuckets::frozen();
        let quotas = tenant_quotas("t", &[(INPUT_BYTES, 1000.0), (INPUT_MESSAGES, 100.0)]);
        let rates = TenantRates::resolve(&buckets, &quotas, "t").expect("an SLA");
        // Both buckets start empty; a second fills 1000 bytes and 100
        // records (their bursts are 50 and 5).
        buckets.advance(Duration::from_secs(1));
        let now = buckets.now_ns();
        assert_eq!(
            rates.charge_input(OverRate::Reject, 40, 5, now),
            Verdict::Go
        );
        // 10 bytes are left but no record: refused, and the bytes stay.
        let refused = rates.charge_input(OverRate::Reject, 10, 1, now);
        let Verdict::Refuse(refusal) = refused else {
            panic!("expected a refusal, got {refused:?}");
        };
        assert_eq!(refusal.retry_after, Duration::from_millis(10));
        assert_eq!(
            refusal.message,
            "tenant t is over its input message rate of 100/s; retry after 10 ms"
        );
        let left = lock(&rates.input_bytes.as_ref().expect("bytes").bucket).available(now);
        assert_eq!(left, 10);
    }

    #[test]
    fn throttled_input_and_output_answer_the_longest_pause() {
        let buckets = QuotaBuckets::frozen();
        let quotas = tenant_quotas(
            "t",
            &[
                (INPUT_BYTES, 1000.0),
                (OUTPUT_BYTES, 1000.0),
                (OUTPUT_MESSAGES, 10.0),
            ],
        );
        let rates = TenantRates::resolve(&buckets, &quotas, "t").expect("an SLA");
        let now = buckets.now_ns();
        assert_eq!(
            rates.charge_input(OverRate::Throttle, 500, 1, now),
            Verdict::Throttle(Duration::from_millis(500))
        );
        // 100 bytes pay 100 ms; 3 records at 10/s pay 300 ms.
        assert_eq!(
            rates.charge_output(100, 3, now),
            Verdict::Throttle(Duration::from_millis(300))
        );
        assert!(rates.limits_output());
    }

    #[test]
    fn an_ip_bucket_starts_with_a_second_of_its_rate() {
        let buckets = QuotaBuckets::frozen();
        let mut quotas = QuotaState::default();
        let default = QuotaEntity([(EntityType::Ip, None)].into());
        let own = QuotaEntity([(EntityType::Ip, Some("10.0.0.1".to_owned()))].into());
        quotas.entries.insert(
            default,
            [("connection_creation_rate".to_owned(), 5.0)].into(),
        );
        quotas
            .entries
            .insert(own, [("connection_creation_rate".to_owned(), 2.0)].into());
        let now = buckets.now_ns();
        let available = |ip: &str| {
            let bucket = buckets
                .ip_bucket(&quotas, ip, "connection_creation_rate")
                .expect("a quota applies");
            let held = lock(&bucket).available(now);
            held
        };
        assert_eq!(available("10.0.0.2"), 5);
        assert_eq!(available("10.0.0.1"), 2);
        assert!(buckets
            .ip_bucket(
                &QuotaState::default(),
                "10.0.0.1",
                "connection_creation_rate"
            )
            .is_none());
    }

    #[test]
    fn a_pause_is_capped_and_the_debt_kept() {
        let buckets = QuotaBuckets::frozen();
        let quotas = tenant_quotas("t", &[(OUTPUT_BYTES, 1000.0)]);
        let rates = TenantRates::resolve(&buckets, &quotas, "t").expect("an SLA");
        // 25 s of debt at once: paused 10 s, then 10 s again, then 5 s.
        let now = buckets.now_ns();
        assert_eq!(
            rates.charge_output(25_000, 0, now),
            Verdict::Throttle(MAX_PAUSE)
        );
        buckets.advance(MAX_PAUSE);
        assert_eq!(
            rates.charge_output(0, 0, buckets.now_ns()),
            Verdict::Throttle(MAX_PAUSE)
        );
        buckets.advance(MAX_PAUSE);
        assert_eq!(
            rates.charge_output(0, 0, buckets.now_ns()),
            Verdict::Throttle(Duration::from_secs(5))
        );
    }

    #[test]
    fn connections_of_one_tenant_share_its_buckets() {
        let buckets = QuotaBuckets::frozen();
        let quotas = tenant_quotas("t", &[(INPUT_BYTES, 1000.0)]);
        let one = TenantRates::resolve(&buckets, &quotas, "t").expect("an SLA");
        let two = TenantRates::resolve(&buckets, &quotas, "t").expect("an SLA");
        let (a, b) = (
            &one.input_bytes.expect("set").bucket,
            &two.input_bytes.expect("set").bucket,
        );
        assert!(Arc::ptr_eq(a, b));
        assert!(TenantRates::resolve(&buckets, &quotas, "other").is_none());
    }
}
