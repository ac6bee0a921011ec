//! One client's session: its subscriptions, its outbox, its subscribe
//! rate; what every transport (gRPC, WebSocket, SSE) drives.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use herald_broker::{CapExceeded, OffsetSpec, TenantConnection, Topic};
use herald_filter::Attributes;
use herald_flow::Verdict;
use herald_subjects::Selector;

use crate::engine::PushEngine;
use crate::error::{AckError, SubscribeError};
use crate::event::{Delivery, Event};
use crate::identity::Identity;
use crate::outbox::Outbox;
use crate::selection::Selection;
use crate::stats::PushStats;
use crate::subscription::{AckMode, Spec, Subscription};
use crate::token::ResumePoint;

/// The shortest pause a paced writer sleeps.
pub const MIN_PACING_PAUSE: Duration = Duration::from_millis(2);

/// The least a paced writer takes from the outbox at once, so that a tiny
/// output rate still moves whole records.
const MIN_PACED_TAKE_BYTES: usize = 4096;

/// Where a new subscription starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// Records published from now on.
    Now,
    /// Every record still stored.
    Earliest,
    /// From these (partition, offset); partitions not listed start at the
    /// earliest.
    Offsets(HashMap<u32, u64>),
    /// The first record of each partition at or after this time (ms since
    /// the Unix epoch).
    Timestamp(i64),
    /// Right after what this resume token covers.
    Token(Vec<u8>),
    /// Where the named subscription left off (its stored positions);
    /// partitions without one, or a subscription without a name, start
    /// now.
    Stored,
    /// The last N records of each subject, then what comes (see `last`).
    LastPerSubject(u32),
}

/// A subscribe request, checked for syntax by the transport.
#[derive(Debug, Clone)]
pub struct SubscribeRequest {
    /// The client's id for it.
    pub id: u64,
    /// The topic.
    pub topic: String,
    /// What it receives.
    pub selector: Selector,
    /// Where it starts.
    pub start: Start,
    /// How it acknowledges.
    pub ack_mode: AckMode,
    /// Lag limit (0: none).
    pub max_lag: u64,
    /// A durable name: the subscription's acknowledged positions are kept
    /// under it (see `durable`).
    pub name: Option<String>,
    /// Which of the records its selector names it receives.
    pub selection: Selection,
    /// Tell the client of records skipped as expired, with gaps.
    pub report_expired: bool,
}

/// One client's session. Dropping it ends every subscription.
pub struct Session {
    engine: Arc<PushEngine>,
    outbox: Arc<Outbox>,
    subscriptions: HashMap<u64, Arc<Subscription>>,
    /// Who the client is: what it may read.
    identity: Identity,
    /// The session counted against its tenant's `max_connections`.
    tenant_connection: Option<TenantConnection>,
    /// Token bucket for subscribes: (tokens, when last refilled).
    rate: (f64, Instant),
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("subscriptions", &self.subscriptions.len())
            .finish()
    }
}

impl Session {
    pub(crate) fn new(engine: Arc<PushEngine>, outbox: Arc<Outbox>) -> Self {
        let burst = f64::from(engine.config.subscribes_per_second);
        Self {
            engine,
            outbox,
            subscriptions: HashMap::new(),
            identity: Identity::anonymous(""),
            tenant_connection: None,
            rate: (burst, Instant::now()),
        }
    }

    /// The session's outbox: its writer drains it with [`Outbox::take`].
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// Who the client is (anonymous until the transport says otherwise).
    pub fn identity(&mut self) -> &mut Identity {
        &mut self.identity
    }

    /// Sets who the client is: a transport calls this once it knows (from
    /// the connection's TLS certificate, a token, or a login in the hello).
    /// The session then counts against the client's tenant; refused when
    /// the tenant holds its `max_connections` (the transport ends the
    /// session).
    pub fn set_identity(&mut self, identity: Identity) -> Result<(), CapExceeded> {
        // The old count goes first: logging in again as the same tenant
        // must not count the session twice.
        self.tenant_connection = None;
        self.tenant_connection = self
            .engine
            .broker
            .admit_tenant_connection(identity.principal())?;
        self.identity = identity;
        Ok(())
    }

    /// The most bytes of events the writer should take at once: small
    /// enough that pacing by the tenant's output rate stays smooth (a
    /// take of 50 ms of the rate at most, as its bucket holds), `max`
    /// without an output byte rate.
    pub fn take_bytes(&mut self, max: usize) -> usize {
        match self
            .identity
            .tenant_rates(&self.engine.broker)
            .and_then(|t| t.output_bytes.as_ref())
        {
            Some(rate) => {
                let burst = (rate.per_second as f64 * herald_flow::sla::BURST_SECONDS) as usize;
                burst.clamp(MIN_PACED_TAKE_BYTES, max.max(MIN_PACED_TAKE_BYTES))
            }
            None => max,
        }
    }

    /// Whether this session's deliveries are charged to its tenant's
    /// output rates (then the writer charges each with
    /// [`Session::charge_delivery`]).
    pub fn output_paced(&mut self) -> bool {
        self.identity
            .tenant_rates(&self.engine.broker)
            .is_some_and(|rates| rates.limits_output())
    }

    /// Charges one delivery about to be written to the tenant's output
    /// rates: how long the writer waits before writing the next, once the
    /// tenant owes at least `MIN_PACING_PAUSE` (a shorter debt is
    /// carried to the next delivery rather than slept off, as a timer
    /// cannot sleep that little). The outbox fills meanwhile, and a
    /// subscription that overflows it moves to catch-up from the log, so
    /// a paced client loses nothing.
    pub fn charge_delivery(&mut self, delivery: &Delivery) -> Option<Duration> {
        let broker = Arc::clone(&self.engine.broker);
        let rates = self.identity.tenant_rates(&broker)?;
        let now = broker.quota_buckets().now_ns();
        match rates.charge_output(delivery.record.cost() as u64, 1, now) {
            Verdict::Throttle(pause) if pause >= MIN_PACING_PAUSE => Some(pause),
            _ => None,
        }
    }

    /// The engine's counters.
    pub fn stats(&self) -> &Arc<crate::PushStats> {
        &self.engine.stats
    }

    /// Adds a subscription. On success `Subscribed` is queued before any of
    /// its deliveries.
    pub async fn subscribe(&mut self, request: SubscribeRequest) -> Result<(), SubscribeError> {
        self.admit(request.id)?;
        let security = self.engine.broker.security();
        self.identity
            .may_read(security, &request.topic)
            .map_err(SubscribeError::NotAuthorized)?;
        if let Some(name) = &request.name {
            let group = format!("{}{name}", crate::durable::GROUP_PREFIX);
            if !self.identity.may(
                security,
                herald_auth::Operation::Read,
                herald_auth::ResourceType::Group,
                &group,
            ) {
                return Err(SubscribeError::NotAuthorized(format!(
                    "{} may not use group {group}",
                    self.identity.principal()
                )));
            }
        }
        let topic = self
            .engine
            .broker
            .topic(&request.topic)
            .ok_or_else(|| SubscribeError::UnknownTopic(request.topic.clone()))?;
        if request.topic.starts_with("__") {
            return Err(SubscribeError::Invalid(format!(
                "{} is an internal topic",
                request.topic
            )));
        }
        held_here(&topic)?;
        if let Some(name) = &request.name {
            crate::durable::check_name(name).map_err(SubscribeError::Invalid)?;
        }
        let starts = match &request.start {
            Start::Stored => {
                let stored = match &request.name {
                    Some(name) => {
                        crate::durable::stored_positions(&self.engine.broker, name, topic.name())
                            .await
                            .map_err(|e| SubscribeError::Invalid(e.to_string()))?
                    }
                    None => HashMap::new(),
                };
                topic
                    .partitions()
                    .iter()
                    .map(|p| {
                        let watermarks = p.watermarks();
                        stored
                            .get(&p.index())
                            .map_or(watermarks.high_watermark, |&o| {
                                o.min(watermarks.high_watermark)
                            })
                    })
                    .collect()
            }
            Start::Token(token) => {
                let point = self.verify(token, &topic)?;
                if point.selector != selector_text(&request.selector) {
                    return Err(SubscribeError::StaleToken(
                        "the token is for another selector".into(),
                    ));
                }
                positions_from(&topic, &point.positions)?
            }
            Start::LastPerSubject(n) => {
                let mut starts = Vec::new();
                for partition in topic.partitions().iter() {
                    starts
                        .push(crate::last::start_for_last(partition, &request.selector, *n).await?);
                }
                starts
            }
            start => start_offsets(&topic, start).await?,
        };
        let durable = request
            .name
            .map(|name| Arc::new(crate::durable::Durable::new(name, request.topic.clone())));
        let spec = Spec {
            id: request.id,
            topic,
            selector: request.selector,
            ack_mode: request.ack_mode,
            max_lag: request.max_lag,
            durable,
            selection: request.selection,
            report_expired: request.report_expired,
        };
        self.add(spec, &starts);
        Ok(())
    }

    /// Subscribes again what a resume token covers, under its old id;
    /// answers that id.
    pub async fn resume(&mut self, token: &[u8]) -> Result<u64, SubscribeError> {
        let preview = self.engine.keys.verify(token, SystemTime::now())?;
        self.admit(preview.subscription_id)?;
        self.identity
            .may_read(self.engine.broker.security(), &preview.topic)
            .map_err(SubscribeError::NotAuthorized)?;
        let topic = self.engine.broker.topic(&preview.topic).ok_or_else(|| {
            SubscribeError::StaleToken(format!("topic {} no longer exists", preview.topic))
        })?;
        held_here(&topic)?;
        let point = self.verify(token, &topic)?;
        let selector = Selector::parse(&point.selector).map_err(|e| {
            SubscribeError::StaleToken(format!("its selector no longer parses: {e}"))
        })?;
        let attributes = Attributes::new(&point.attributes).map_err(|e| {
            SubscribeError::StaleToken(format!("its attributes are no longer valid: {e}"))
        })?;
        let selection = Selection::new(point.filter.as_deref(), attributes)
            .map_err(|e| SubscribeError::StaleToken(format!("its filter no longer parses: {e}")))?;
        let starts = positions_from(&topic, &point.positions)?;
        let spec = Spec {
            id: point.subscription_id,
            topic,
            selector,
            ack_mode: point.ack_mode,
            max_lag: point.max_lag,
            durable: None,
            selection,
            report_expired: point.report_expired,
        };
        self.add(spec, &starts);
        Ok(point.subscription_id)
    }

    /// Ends a subscription; `Unsubscribed` is queued after its last
    /// delivery. False if there was no such subscription.
    pub fn unsubscribe(&mut self, id: u64) -> bool {
        let Some(subscription) = self.subscriptions.remove(&id) else {
            return false;
        };
        self.end(&subscription);
        self.outbox.push_event(Event::Unsubscribed {
            subscription_id: id,
        });
        true
    }

    /// Acknowledges a subscription's deliveries of `partition` up to
    /// `offset`; answers the checkpoint token that now covers them.
    pub fn ack(&mut self, id: u64, partition: u32, offset: u64) -> Result<Vec<u8>, AckError> {
        let subscription = self
            .subscriptions
            .get(&id)
            .ok_or(AckError::UnknownSubscription(id))?;
        if !subscription.ack(partition, offset) {
            return Err(AckError::NotDelivered {
                subscription_id: id,
                partition,
                offset,
            });
        }
        if let Some(durable) = &subscription.durable {
            durable.save(&self.engine.broker, subscription.positions());
        }
        Ok(self.token_of(subscription))
    }

    /// The resume token of a subscription now; `None` if there is none
    /// with that id.
    pub fn checkpoint(&self, id: u64) -> Option<Vec<u8>> {
        self.subscriptions.get(&id).map(|s| self.token_of(s))
    }

    /// Adds to the client's credit.
    pub fn grant(&self, messages: u64, bytes: u64) {
        self.outbox.grant(messages, bytes);
    }

    fn token_of(&self, subscription: &Subscription) -> Vec<u8> {
        self.engine.keys.sign(&ResumePoint {
            issued_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            topic: subscription.topic.name().to_owned(),
            topic_id: subscription.topic.id(),
            subscription_id: subscription.id,
            selector: selector_text(&subscription.selector),
            ack_mode: subscription.ack_mode,
            max_lag: subscription.max_lag,
            filter: subscription.selection.filter_text().map(str::to_owned),
            report_expired: subscription.report_expired,
            attributes: subscription
                .selection
                .attributes()
                .iter()
                .map(<[u8]>::to_vec)
                .collect(),
            positions: subscription.positions(),
        })
    }

    /// Checks the limits a new subscription must pass.
    fn admit(&mut self, id: u64) -> Result<(), SubscribeError> {
        if self.subscriptions.contains_key(&id) {
            return Err(SubscribeError::DuplicateId(id));
        }
        let max = self.engine.config.max_subscriptions_per_session;
        if self.subscriptions.len() >= max {
            return Err(SubscribeError::TooManySubscriptions { max });
        }
        let per_second = self.engine.config.subscribes_per_second;
        let (tokens, since) = &mut self.rate;
        let now = Instant::now();
        *tokens = (*tokens + now.duration_since(*since).as_secs_f64() * f64::from(per_second))
            .min(f64::from(per_second));
        *since = now;
        if *tokens < 1.0 {
            return Err(SubscribeError::SubscribeRate { per_second });
        }
        *tokens -= 1.0;
        Ok(())
    }

    fn verify(&self, token: &[u8], topic: &Topic) -> Result<ResumePoint, SubscribeError> {
        let point = self.engine.keys.verify(token, SystemTime::now())?;
        if point.topic != topic.name() {
            return Err(SubscribeError::StaleToken(format!(
                "the token is for topic {}",
                point.topic
            )));
        }
        if point.topic_id != topic.id() {
            return Err(SubscribeError::StaleToken(format!(
                "topic {} was deleted since the token was issued",
                point.topic
            )));
        }
        Ok(point)
    }

    fn add(&mut self, spec: Spec, starts: &[u64]) {
        let id = spec.id;
        let subscription = Arc::new(Subscription::new(spec, Arc::clone(&self.outbox), starts));
        self.outbox.push_event(Event::Subscribed {
            subscription_id: id,
            start_offsets: starts
                .iter()
                .enumerate()
                .map(|(p, &o)| (p as u32, o))
                .collect(),
        });
        let frontiers = self.engine.route(&subscription);
        for (partition, frontier) in frontiers.into_iter().enumerate() {
            let partition = partition as u32;
            // Most subscriptions start at the tail: live at once, no reader.
            if subscription.go_live_or_next(partition, &frontier).is_some() {
                self.engine
                    .pool
                    .start(Arc::clone(&subscription), partition, frontier);
            }
        }
        self.subscriptions.insert(id, subscription);
    }

    fn end(&self, subscription: &Arc<Subscription>) {
        subscription.close();
        self.engine.unroute(subscription);
        if let Some(durable) = &subscription.durable {
            durable.save(&self.engine.broker, subscription.positions());
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for subscription in std::mem::take(&mut self.subscriptions).into_values() {
            self.end(&subscription);
        }
        self.outbox.close();
        PushStats::sub(&self.engine.stats.sessions, 1);
    }
}

/// Refuses a topic with partitions of which this node holds no replica
/// (a replicated topic whose replication factor is below the cluster's
/// size): their records are not here to push, and a subscription that
/// silently lacked them would lose records. Names the nodes that hold
/// every partition, where the client can subscribe.
fn held_here(topic: &Topic) -> Result<(), SubscribeError> {
    let partitions = topic.partitions();
    let elsewhere: Vec<String> = partitions
        .iter()
        .filter(|p| !p.held_here())
        .map(|p| p.index().to_string())
        .collect();
    if elsewhere.is_empty() {
        return Ok(());
    }
    let mut holders: Option<Vec<u64>> = None;
    for set in partitions.iter().filter_map(|p| p.replica_set()) {
        let nodes = holders.get_or_insert_with(|| set.nodes.get());
        nodes.retain(|&n| set.nodes.contains(n));
    }
    let mut holders = holders.unwrap_or_default();
    holders.sort_unstable();
    let advice = if holders.is_empty() {
        "no node holds every partition".to_owned()
    } else {
        let names: Vec<String> = holders.iter().map(u64::to_string).collect();
        format!("nodes {} hold every partition", names.join(", "))
    };
    let plural = if elsewhere.len() == 1 { "" } else { "s" };
    Err(SubscribeError::Invalid(format!(
        "this node holds no replica of partition{plural} {} of topic {}: subscribe on a node that does ({advice})",
        elsewhere.join(", "),
        topic.name()
    )))
}

/// How a selector is written in a token: as the client wrote it.
fn selector_text(selector: &Selector) -> Vec<u8> {
    match selector {
        Selector::Literal(subject) => subject.to_vec(),
        Selector::Pattern(pattern) => pattern.to_string().into_bytes(),
    }
}

/// A token's positions for the topic's partitions now; partitions created
/// since the token start at the earliest.
fn positions_from(topic: &Topic, positions: &[(u32, u64)]) -> Result<Vec<u64>, SubscribeError> {
    let partitions = topic.partitions();
    let mut starts: Vec<u64> = partitions
        .iter()
        .map(|p| p.watermarks().log_start_offset)
        .collect();
    for &(partition, offset) in positions {
        let Some(start) = starts.get_mut(partition as usize) else {
            return Err(SubscribeError::StaleToken(format!(
                "partition {partition} no longer exists"
            )));
        };
        // Below the log start is reported as a gap by the catch-up reader;
        // past the end cannot have been acknowledged here.
        let high = partitions[partition as usize].watermarks().high_watermark;
        *start = offset.min(high);
    }
    Ok(starts)
}

/// Each partition's first offset for `start`.
async fn start_offsets(topic: &Topic, start: &Start) -> Result<Vec<u64>, SubscribeError> {
    let partitions = topic.partitions();
    let mut starts = Vec::with_capacity(partitions.len());
    if let Start::Offsets(offsets) = start {
        if let Some(bad) = offsets.keys().find(|&&p| p as usize >= partitions.len()) {
            return Err(SubscribeError::Invalid(format!(
                "topic {} has no partition {bad}",
                topic.name()
            )));
        }
    }
    for partition in partitions.iter() {
        let watermarks = partition.watermarks();
        let offset = match start {
            Start::Now => watermarks.high_watermark,
            Start::Earliest => watermarks.log_start_offset,
            Start::Offsets(offsets) => offsets
                .get(&partition.index())
                .copied()
                .unwrap_or(watermarks.log_start_offset)
                .min(watermarks.high_watermark),
            Start::Timestamp(ms) => partition
                .list_offset(OffsetSpec::Timestamp(*ms))
                .await?
                .map_or(watermarks.high_watermark, |found| found.offset),
            Start::Token(_) | Start::Stored | Start::LastPerSubject(_) => {
                return Err(SubscribeError::Invalid(
                    "a token or stored start is read by its caller".into(),
                ))
            }
        };
        starts.push(offset);
    }
    Ok(starts)
}
