//! Client quotas and tenant SLAs, enforced on the Kafka listeners.
//!
//! A produce is charged as its frame is read, before the next one is: the
//! frame's bytes go to the client's `producer_byte_rate` (Kafka's quota,
//! always in throttle mode) and to its tenant's `input_bytes_per_sec`. In
//! throttle mode (Kafka's, the default) an over-rate request is accepted,
//! answered with `throttle_time_ms`, and the connection is not read from
//! until the debt is paid, so the rate holds even for clients that ignore
//! `throttle_time_ms` (librdkafka does). A tenant with `reject_over_rate`
//! set has an over-rate produce refused instead, with nothing taken, and
//! is not paused: it is told when to retry (seed 004's reject mode). The
//! tenant's `input_messages_per_sec` is charged by the produce handler,
//! which is where the record counts are decoded.
//!
//! Fetches are sized to the tokens the client's `consumer_byte_rate` and
//! its tenant's `output_bytes_per_sec` hold, and their answers charged.
//!
//! One token bucket (herald-flow's GCRA) per quota entity and key, shared
//! by every connection of that entity as Kafka shares its quota sensors; a
//! connection keeps its buckets once resolved ([`ClientQuotas`]) and looks
//! again only when the quotas, the tenants or its client id change.

use std::sync::Arc;
use std::time::Duration;

use herald_auth::SecurityState;
use herald_flow::sla::{self, Bucket, QuotaBuckets, TenantRates};
use herald_flow::QuotaState;
use parking_lot::Mutex;

pub use herald_flow::sla::{Refusal, Verdict};

/// Kafka's produce byte rate, per user and client id.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Kafka's fetch byte rate, per user and client id.
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Kafka's request-time share, per user and client id: the percentage of
/// one thread's time its requests may take (200: two threads).
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// Kafka's rate of partition mutations (partitions created or deleted)
/// per second, per user and client id (KIP-599).
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
/// Kafka's rate of new connections, per IP address.
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// Nanoseconds of handling per second one percent of `request_percentage`
/// allows.
const NANOS_PER_PERCENT: f64 = 10_000_000.0;

/// The buckets one connection's client is charged to.
#[derive(Debug, Default)]
struct Resolved {
    produce: Option<Bucket>,
    fetch: Option<Bucket>,
    /// `request_percentage`, in nanoseconds of handling per second.
    request: Option<Bucket>,
    /// `controller_mutation_rate`, in partitions per second.
    mutation: Option<Bucket>,
    tenant: Option<TenantRates>,
}

/// What the quotas and tenants were when a connection resolved its
/// buckets (compared by identity: both are replaced whole on change).
#[derive(Debug, Default)]
struct ResolvedFrom {
    quotas: Option<Arc<QuotaState>>,
    security: Option<Arc<SecurityState>>,
    principal: String,
    client_id: String,
}

/// One connection's quotas, resolved once and kept while nothing they
/// depend on changes: no map lookup per request.
#[derive(Debug, Default)]
pub struct ClientQuotas {
    from: ResolvedFrom,
    resolved: Resolved,
}

impl ClientQuotas {
    /// Resolves again if the quotas, the tenants, the principal or the
    /// client id changed since the last time; answers whether any quota
    /// applies to the client at all.
    fn refresh(
        &mut self,
        quotas: &Arc<QuotaState>,
        security: &Arc<SecurityState>,
        principal: &str,
        client_id: &str,
        buckets: &QuotaBuckets,
    ) {
        let from = &self.from;
        let same = from.quotas.as_ref().is_some_and(|q| Arc::ptr_eq(q, quotas))
            && from
                .security
                .as_ref()
                .is_some_and(|s| Arc::ptr_eq(s, security))
            && from.principal == principal
            && from.client_id == client_id;
        if same {
            return;
        }
        let user = principal.strip_prefix("User:").unwrap_or(principal);
        self.resolved = Resolved {
            produce: buckets.client_bucket(quotas, user, client_id, PRODUCER_BYTE_RATE, 1.0),
            fetch: buckets.client_bucket(quotas, user, client_id, CONSUMER_BYTE_RATE, 1.0),
            request: buckets.client_bucket(
                quotas,
                user,
                client_id,
                REQUEST_PERCENTAGE,
                NANOS_PER_PERCENT,
            ),
            mutation: buckets.client_bucket(quotas, user, client_id, CONTROLLER_MUTATION_RATE, 1.0),
            tenant: security
                .tenant_of_principal(principal)
                .and_then(|t| TenantRates::resolve(buckets, quotas, &t.name)),
        };
        self.from = ResolvedFrom {
            quotas: Some(Arc::clone(quotas)),
            security: Some(Arc::clone(security)),
            principal: principal.to_owned(),
            client_id: client_id.to_owned(),
        };
    }
}

/// The quota-relevant part of a connection: what it is charged to and
/// until when it is not read from.
#[derive(Debug, Default)]
pub struct ConnectionQuotas {
    quotas: Mutex<ClientQuotas>,
    /// Not read from until then (ns on the quota clock).
    paused_until_ns: std::sync::atomic::AtomicU64,
}

/// Who is asking, for resolving quotas.
#[derive(Debug, Clone, Copy)]
pub struct Client<'a> {
    /// The principal (`User:alice`).
    pub principal: &'a str,
    /// The client id of the request.
    pub client_id: &'a str,
}

/// Everything a charge is made against: the buckets, the quotas and
/// tenants in force, and who is asking.
#[derive(Debug, Clone, Copy)]
pub struct Charging<'a> {
    /// Every entity's buckets.
    pub buckets: &'a QuotaBuckets,
    /// The quotas in force.
    pub quotas: &'a Arc<QuotaState>,
    /// The tenants in force.
    pub security: &'a Arc<SecurityState>,
    /// Who is asking.
    pub client: Client<'a>,
}

impl ConnectionQuotas {
    fn with_resolved<T>(&self, at: &Charging<'_>, f: impl FnOnce(&Resolved) -> T) -> T {
        let mut slot = self.quotas.lock();
        slot.refresh(
            at.quotas,
            at.security,
            at.client.principal,
            at.client.client_id,
            at.buckets,
        );
        f(&slot.resolved)
    }

    fn pause(&self, buckets: &QuotaBuckets, verdict: &Verdict) {
        if let Verdict::Throttle(pause) = verdict {
            let until = buckets
                .now_ns()
                .saturating_add(u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX));
            self.paused_until_ns
                .fetch_max(until, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Charges a produce frame of `bytes` as it is read: the client's
    /// produce quota and its tenant's input byte rate.
    pub fn admit_produce(&self, at: &Charging<'_>, bytes: u64) -> Verdict {
        let verdict = self.with_resolved(at, |r| {
            // Read after resolving: a bucket made then must not be ahead.
            let now = at.buckets.now_ns();
            // The tenant first: a refusal there must take nothing anywhere.
            let tenant = r
                .tenant
                .as_ref()
                .map_or(Verdict::Go, |t| t.charge_input(t.mode(), bytes, 0, now));
            if matches!(tenant, Verdict::Refuse(_)) {
                return tenant;
            }
            tenant.and(sla::take(r.produce.as_ref(), bytes, now))
        });
        self.pause(at.buckets, &verdict);
        verdict
    }

    /// Charges `records` produced to the tenant's input message rate.
    pub fn admit_records(&self, at: &Charging<'_>, records: u64) -> Verdict {
        let verdict = self.with_resolved(at, |r| {
            // Read after resolving: a bucket made then must not be ahead.
            let now = at.buckets.now_ns();
            r.tenant
                .as_ref()
                .map_or(Verdict::Go, |t| t.charge_input(t.mode(), 0, records, now))
        });
        self.pause(at.buckets, &verdict);
        verdict
    }

    /// The bytes a fetch may answer now: what the client's fetch quota and
    /// its tenant's output byte rate hold (`None`: no limit).
    pub fn fetch_allowance(&self, at: &Charging<'_>) -> Option<u64> {
        self.with_resolved(at, |r| {
            let now = at.buckets.now_ns();
            let tenant = r
                .tenant
                .as_ref()
                .and_then(|t| t.output_bytes.as_ref().map(|rate| &rate.bucket));
            [r.fetch.as_ref(), tenant]
                .into_iter()
                .flatten()
                .map(|b| sla::lock(b).available(now))
                .min()
        })
    }

    /// Charges a fetch's answer of `bytes` and `records` (counted only if
    /// a message rate applies): the client's fetch quota and its tenant's
    /// output rates, always in throttle mode (what was read cannot be
    /// taken back).
    pub fn charge_fetch(
        &self,
        at: &Charging<'_>,
        bytes: u64,
        records: impl FnOnce() -> u64,
    ) -> Verdict {
        let verdict = self.with_resolved(at, |r| {
            // Read after resolving: a bucket made then must not be ahead.
            let now = at.buckets.now_ns();
            let client = sla::take(r.fetch.as_ref(), bytes, now);
            let tenant = r.tenant.as_ref().map_or(Verdict::Go, |t| {
                let records = if t.output_messages.is_some() {
                    records()
                } else {
                    0
                };
                t.charge_output(bytes, records, now)
            });
            client.and(tenant)
        });
        self.pause(at.buckets, &verdict);
        verdict
    }

    /// Whether the client's requests are timed for a `request_percentage`.
    pub fn has_request_quota(&self, at: &Charging<'_>) -> bool {
        self.with_resolved(at, |r| r.request.is_some())
    }

    /// Charges `spent` handling a request to the client's
    /// `request_percentage`, in throttle mode.
    pub fn charge_request(&self, at: &Charging<'_>, spent: Duration) -> Verdict {
        let verdict = self.with_resolved(at, |r| {
            let now = at.buckets.now_ns();
            let ns = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
            sla::take(r.request.as_ref(), ns, now)
        });
        self.pause(at.buckets, &verdict);
        verdict
    }

    /// Admits a mutation of `partitions` under the client's
    /// `controller_mutation_rate`, as KIP-599 does: a strict request is
    /// refused (with how long until the rate has paid its debt) while the
    /// client owes anything; otherwise the mutation goes ahead and is
    /// charged, even past the rate.
    pub fn admit_mutation(
        &self,
        at: &Charging<'_>,
        partitions: u64,
        strict: bool,
    ) -> Result<(), Duration> {
        self.with_resolved(at, |r| {
            let Some(bucket) = &r.mutation else {
                return Ok(());
            };
            let now = at.buckets.now_ns();
            let mut bucket = sla::lock(bucket);
            let owed = bucket.wait_ns(0, now);
            if strict && owed > 0 {
                return Err(Duration::from_nanos(owed));
            }
            bucket.take(partitions, now);
            Ok(())
        })
    }

    /// After a request's mutations: the time the client owes its
    /// `controller_mutation_rate` as a throttle, the connection paused for
    /// it.
    pub fn mutation_throttle(&self, at: &Charging<'_>) -> Verdict {
        let verdict = self.with_resolved(at, |r| {
            let Some(bucket) = &r.mutation else {
                return Verdict::Go;
            };
            let now = at.buckets.now_ns();
            match sla::lock(bucket).wait_ns(0, now) {
                0 => Verdict::Go,
                owed => Verdict::Throttle(Duration::from_nanos(owed).min(sla::MAX_PAUSE)),
            }
        });
        self.pause(at.buckets, &verdict);
        verdict
    }

    /// How long reading from the connection waits still, if a quota
    /// paused it.
    pub fn pause_left(&self, buckets: &QuotaBuckets) -> Option<Duration> {
        let until = self
            .paused_until_ns
            .load(std::sync::atomic::Ordering::Relaxed);
        let now = buckets.now_ns();
        (until > now).then(|| Duration::from_nanos(until - now))
    }
}

/// Runs `f` with `session`'s client and what its quotas are resolved
/// against; `None` (nothing to charge) while no quota is set at all.
fn with_client<T>(
    ctx: &crate::handlers::Context,
    session: &crate::session::Session,
    client_id: &str,
    f: impl FnOnce(&Charging<'_>) -> T,
) -> Option<T> {
    if !ctx.broker.has_quotas() {
        return None;
    }
    let quotas = ctx.broker.quotas();
    let security = ctx.broker.security().state();
    let principal = session
        .principal()
        .unwrap_or_else(|| crate::session::ANONYMOUS.to_owned());
    Some(f(&Charging {
        buckets: ctx.broker.quota_buckets(),
        quotas: &quotas,
        security: &security,
        client: Client {
            principal: &principal,
            client_id,
        },
    }))
}

/// Charges a request frame as it is read: a produce to its client's
/// produce quota and its tenant's input byte rate; nothing else is charged
/// here. Pauses the connection when throttled.
pub fn admit_frame(
    ctx: &crate::handlers::Context,
    session: &crate::session::Session,
    frame: &[u8],
) -> Verdict {
    let Some(client_id) = produce_client_id(frame) else {
        return Verdict::Go;
    };
    let bytes = frame.len() as u64;
    with_client(ctx, session, client_id, |at| {
        session.quotas().admit_produce(at, bytes)
    })
    .unwrap_or_default()
}

/// Charges `records` produced by `session`'s client to its tenant's input
/// message rate.
pub fn admit_records(
    ctx: &crate::handlers::Context,
    session: &crate::session::Session,
    client_id: &str,
    records: u64,
) -> Verdict {
    if records == 0 {
        return Verdict::Go;
    }
    with_client(ctx, session, client_id, |at| {
        session.quotas().admit_records(at, records)
    })
    .unwrap_or_default()
}

/// What a fetch of `session`'s client may answer now, in bytes (`None`:
/// no quota applies).
pub fn fetch_allowance(
    ctx: &crate::handlers::Context,
    session: &crate::session::Session,
    client_id: &str,
) -> Option<u64> {
    with_client(ctx, session, client_id, |at| {
        session.quotas().fetch_allowance(at)
    })
    .flatten()
}

/// Charges a fetch answer of `bytes` (and the `records` it counts) to
/// `session`'s client; pauses the connection when over.
pub fn charge_fetch(
    ctx: &crate::handlers::Context,
    session: &crate::session::Session,
    client_id: &str,
    bytes: u64,
    records: impl FnOnce() -> u64,
) -> Verdict {
    if bytes == 0 {
        return Verdict::Go;
    }
    with_client(ctx, session, client_id, |at| {
        session.quotas().charge_fetch(at, bytes, records)
    })
    .unwrap_or_default()
}

/// Whether `session`'s client has a `request_percentage`: then the time
/// its requests take is measured and charged.
pub fn request_quota_applies(
    ctx: &crate::handlers::Context,
    session: &crate::session::Session,
    client_id: &str,
) -> bool {
    with_client(ctx, session, client_id, |at| {
        session.quotas().has_request_quota(at)
    })
    .unwrap_or(false)
}

/// Charges `spent` handling one of `session`'s requests to its client's
/// `request_percentage`; pauses the connection when over.
pub fn charge_request_time(
    ctx: &crate::handlers::Context,
    session: &crate::session::Session,
    client_id: &str,
    spent: Duration,
) -> Verdict {
    with_client(ctx, session, client_id, |at| {
        session.quotas().charge_request(at, spent)
    })
    .unwrap_or_default()
}

/// One request's partition mutations (CreateTopics, CreatePartitions,
/// DeleteTopics), charged to its client's `controller_mutation_rate`.
pub struct Mutations<'a> {
    ctx: &'a crate::handlers::Context,
    session: &'a crate::session::Session,
    client_id: String,
    strict: bool,
}

impl<'a> Mutations<'a> {
    /// The mutations of one request by `session`'s client `client_id`;
    /// `strict` for the versions that may be refused
    /// THROTTLING_QUOTA_EXCEEDED (CreateTopics 6+, CreatePartitions 3+,
    /// DeleteTopics 5+), where older ones are only throttled.
    pub fn new(
        ctx: &'a crate::handlers::Context,
        session: &'a crate::session::Session,
        client_id: String,
        strict: bool,
    ) -> Self {
        Self {
            ctx,
            session,
            client_id,
            strict,
        }
    }

    /// Admits a mutation of `partitions`: `Err` with the refusal's message
    /// when the client's rate refuses it.
    pub fn admit(&self, partitions: u64) -> Result<(), String> {
        let outcome = with_client(self.ctx, self.session, &self.client_id, |at| {
            self.session
                .quotas()
                .admit_mutation(at, partitions, self.strict)
        });
        match outcome {
            Some(Err(owed)) => Err(format!(
                "over the controller mutation rate of client {}: retry after {} ms",
                self.client_id,
                owed.as_millis().max(1)
            )),
            _ => Ok(()),
        }
    }

    /// The throttle time to answer with (the connection is paused for it).
    pub fn throttle_time_ms(&self) -> i32 {
        with_client(self.ctx, self.session, &self.client_id, |at| {
            self.session.quotas().mutation_throttle(at)
        })
        .unwrap_or_default()
        .throttle_time_ms()
    }
}

/// Admits a new connection from `ip` under its `connection_creation_rate`
/// (a refusal takes nothing): `Some(delay)` when over, after which the
/// connection is closed unread, as Kafka closes a throttled one.
pub fn admit_connection(ctx: &crate::handlers::Context, ip: std::net::IpAddr) -> Option<Duration> {
    if !ctx.broker.has_quotas() {
        return None;
    }
    let quotas = ctx.broker.quotas();
    let buckets = ctx.broker.quota_buckets();
    let bucket = buckets.ip_bucket(&quotas, &ip.to_string(), CONNECTION_CREATION_RATE)?;
    let now = buckets.now_ns();
    let admission = sla::lock(&bucket).try_take(1, now);
    match admission {
        herald_flow::Admission::Rejected { retry_after_ns } => {
            Some(Duration::from_nanos(retry_after_ns).min(sla::MAX_PAUSE))
        }
        _ => None,
    }
}

/// The client id of a Produce request frame (`None` for any other API):
/// read from the request header without decoding the body, so the frame
/// can be charged as it is read.
pub fn produce_client_id(frame: &[u8]) -> Option<&str> {
    const PRODUCE: i16 = 0;
    let api_key = i16::from_be_bytes(frame.get(0..2)?.try_into().ok()?);
    if api_key != PRODUCE {
        return None;
    }
    // api key, api version, correlation id, then the client id as a
    // nullable int16-prefixed string in every header version.
    let length = i16::from_be_bytes(frame.get(8..10)?.try_into().ok()?);
    if length < 0 {
        return Some("");
    }
    std::str::from_utf8(frame.get(10..10 + length as usize)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_flow::sla::{INPUT_BYTES, OUTPUT_BYTES, REJECT_OVER_RATE};
    use herald_flow::{EntityType, QuotaEntity};

    fn produce_frame(client_id: Option<&str>) -> Vec<u8> {
        let mut frame = vec![0, 0, 0, 9, 0, 0, 0, 7];
        match client_id {
            Some(id) => {
                frame.extend_from_slice(&(id.len() as i16).to_be_bytes());
                frame.extend_from_slice(id.as_bytes());
            }
            None => frame.extend_from_slice(&(-1i16).to_be_bytes()),
        }
        frame.extend_from_slice(&[0; 16]);
        frame
    }

    #[test]
    fn the_client_id_of_a_produce_frame_is_read_from_its_header() {
        assert_eq!(
            produce_client_id(&produce_frame(Some("app-1"))),
            Some("app-1")
        );
        assert_eq!(produce_client_id(&produce_frame(None)), Some(""));
        let mut fetch = produce_frame(Some("app-1"));
        fetch[1] = 1;
        assert_eq!(produce_client_id(&fetch), None);
        // A header cut short is no produce to charge.
        assert_eq!(produce_client_id(&produce_frame(Some("app-1"))[..12]), None);
        assert_eq!(produce_client_id(&[0]), None);
    }

    fn state_with(entries: &[(QuotaEntity, &str, f64)]) -> Arc<QuotaState> {
        let mut state = QuotaState::default();
        for (entity, key, value) in entries {
            state
                .entries
                .entry(entity.clone())
                .or_default()
                .insert((*key).to_owned(), *value);
        }
        Arc::new(state)
    }

    fn at<'a>(
        buckets: &'a QuotaBuckets,
        quotas: &'a Arc<QuotaState>,
        security: &'a Arc<SecurityState>,
        client: Client<'a>,
    ) -> Charging<'a> {
        Charging {
            buckets,
            quotas,
            security,
            client,
        }
    }

    fn entity(kind: EntityType, name: Option<&str>) -> QuotaEntity {
        QuotaEntity([(kind, name.map(str::to_owned))].into())
    }

    fn security_with_tenant(tenant: &str, principal: &str) -> Arc<SecurityState> {
        let mut state = SecurityState::default();
        state.tenants.insert(
            tenant.to_owned(),
            herald_auth::Tenant {
                name: tenant.to_owned(),
                principals: [principal.to_owned()].into(),
                namespaces: Default::default(),
            },
        );
        Arc::new(state)
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_default_quota_is_each_clients_own() {
        let buckets = QuotaBuckets::default();
        let quotas = state_with(&[(
            entity(EntityType::ClientId, None),
            PRODUCER_BYTE_RATE,
            1000.0,
        )]);
        let security = Arc::new(SecurityState::default());
        let (a, b) = (ConnectionQuotas::default(), ConnectionQuotas::default());
        let client = |id| Client {
            principal: "User:ANONYMOUS",
            client_id: id,
        };
        // A new bucket starts empty: 100 bytes at 1000 B/s owe 100 ms.
        let pause = |v: Verdict| match v {
            Verdict::Throttle(p) => p,
            other => panic!("not throttled: {other:?}"),
        };
        let first = pause(a.admit_produce(&at(&buckets, &quotas, &security, client("a")), 100));
        assert!(first > 90 * MS && first <= 100 * MS, "{first:?}");
        // Another client id owes only its own 100 bytes.
        let other = pause(b.admit_produce(&at(&buckets, &quotas, &security, client("b")), 100));
        assert!(other > 90 * MS && other <= 100 * MS, "{other:?}");
        let again = pause(a.admit_produce(&at(&buckets, &quotas, &security, client("a")), 100));
        assert!(again > 190 * MS && again <= 200 * MS, "{again:?}");
        assert!(a.pause_left(&buckets).is_some_and(|p| p > 190 * MS));
        // Paid off after the pause; an idle client gets back its 50 ms burst.
        buckets.advance(Duration::from_secs(1));
        assert!(a.pause_left(&buckets).is_none());
        assert_eq!(
            a.admit_produce(&at(&buckets, &quotas, &security, client("a")), 50),
            Verdict::Go
        );
    }

    #[test]
    fn request_time_is_charged_at_its_percentage_of_a_thread() {
        let buckets = QuotaBuckets::frozen();
        let quotas = state_with(&[(
            entity(EntityType::ClientId, Some("busy")),
            REQUEST_PERCENTAGE,
            10.0,
        )]);
        let security = Arc::new(SecurityState::default());
        let quotas_of = ConnectionQuotas::default();
        let client = |id| Client {
            principal: "User:ANONYMOUS",
            client_id: id,
        };
        let busy = at(&buckets, &quotas, &security, client("busy"));
        assert!(quotas_of.has_request_quota(&busy));
        // 10% of a thread is 100 ms per second: 20 ms of handling owes
        // 200 ms, and the connection is paused that long.
        assert_eq!(
            quotas_of.charge_request(&busy, Duration::from_millis(20)),
            Verdict::Throttle(Duration::from_millis(200))
        );
        assert_eq!(
            quotas_of.pause_left(&buckets),
            Some(Duration::from_millis(200))
        );
        let other = ConnectionQuotas::default();
        assert!(!other.has_request_quota(&at(&buckets, &quotas, &security, client("free"))));
    }

    #[test]
    fn a_strict_mutation_is_refused_while_the_rate_is_owed() {
        let buckets = QuotaBuckets::frozen();
        let quotas = state_with(&[(
            entity(EntityType::ClientId, Some("admin")),
            CONTROLLER_MUTATION_RATE,
            10.0,
        )]);
        let security = Arc::new(SecurityState::default());
        let quotas_of = ConnectionQuotas::default();
        let client = Client {
            principal: "User:ANONYMOUS",
            client_id: "admin",
        };
        let charging = at(&buckets, &quotas, &security, client);
        // The bucket starts empty but owes nothing: the first mutation goes
        // ahead, however large (KIP-599), and 20 partitions owe 2 s.
        assert_eq!(quotas_of.admit_mutation(&charging, 20, true), Ok(()));
        assert_eq!(
            quotas_of.admit_mutation(&charging, 1, true),
            Err(Duration::from_secs(2))
        );
        // An older version is let through, and throttled for the debt.
        assert_eq!(quotas_of.admit_mutation(&charging, 10, false), Ok(()));
        assert_eq!(
            quotas_of.mutation_throttle(&charging),
            Verdict::Throttle(Duration::from_secs(3))
        );
        buckets.advance(Duration::from_secs(3));
        assert_eq!(quotas_of.admit_mutation(&charging, 1, true), Ok(()));
    }

    #[test]
    fn a_rejecting_tenant_is_refused_with_nothing_taken() {
        let buckets = QuotaBuckets::default();
        let tenant = entity(EntityType::Tenant, Some("acme"));
        let quotas = state_with(&[
            (tenant.clone(), INPUT_BYTES, 1000.0),
            (tenant, REJECT_OVER_RATE, 1.0),
        ]);
        let security = security_with_tenant("acme", "User:alice");
        let conn = ConnectionQuotas::default();
        let alice = Client {
            principal: "User:alice",
            client_id: "app",
        };
        let Verdict::Refuse(refusal) =
            conn.admit_produce(&at(&buckets, &quotas, &security, alice), 60)
        else {
            panic!("a produce over a rejecting tenant's rate was not refused");
        };
        assert!(
            refusal.message.contains("tenant acme"),
            "{}",
            refusal.message
        );
        // Larger than the 50-byte burst: it waits for a full bucket.
        assert!(refusal.retry_after > 40 * MS && refusal.retry_after <= 50 * MS);
        // Refused, not paused: the client decides when to come back.
        assert!(conn.pause_left(&buckets).is_none());
        // Nothing was taken: once the burst refilled, 50 bytes go at once.
        buckets.advance(50 * MS);
        assert_eq!(
            conn.admit_produce(&at(&buckets, &quotas, &security, alice), 50),
            Verdict::Go
        );
        // Someone outside the tenant is not charged to it.
        let bob = Client {
            principal: "User:bob",
            client_id: "app",
        };
        assert_eq!(
            conn.admit_produce(&at(&buckets, &quotas, &security, bob), 5000),
            Verdict::Go
        );
    }

    #[test]
    fn a_fetch_is_allowed_what_the_smaller_bucket_holds() {
        let buckets = QuotaBuckets::default();
        let tenant = entity(EntityType::Tenant, Some("acme"));
        let quotas = state_with(&[
            (tenant, OUTPUT_BYTES, 10_000.0),
            (
                entity(EntityType::User, Some("alice")),
                CONSUMER_BYTE_RATE,
                5_000.0,
            ),
        ]);
        let security = security_with_tenant("acme", "User:alice");
        let conn = ConnectionQuotas::default();
        let alice = Client {
            principal: "User:alice",
            client_id: "app",
        };
        assert_eq!(
            conn.fetch_allowance(&at(&buckets, &quotas, &security, alice)),
            Some(0)
        );
        // Full bursts: 500 bytes for the tenant, 250 for the user.
        buckets.advance(Duration::from_secs(1));
        assert_eq!(
            conn.fetch_allowance(&at(&buckets, &quotas, &security, alice)),
            Some(250)
        );
        let verdict = conn.charge_fetch(&at(&buckets, &quotas, &security, alice), 750, || 8);
        assert!(
            matches!(verdict, Verdict::Throttle(p) if p > 90 * MS && p <= 100 * MS),
            "{verdict:?}"
        );
        assert_eq!(
            conn.fetch_allowance(&at(&buckets, &quotas, &security, alice)),
            Some(0)
        );
        let nobody = ConnectionQuotas::default();
        let carol = Client {
            principal: "User:carol",
            client_id: "app",
        };
        assert_eq!(
            nobody.fetch_allowance(&at(&buckets, &quotas, &security, carol)),
            None
        );
    }
}
