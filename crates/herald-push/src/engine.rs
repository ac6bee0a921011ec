//! The push engine: the routing tables of subscribed topics, their
//! tailers, the catch-up pool, the token keys, and the session count.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use herald_broker::{Broker, Topic};
use herald_subjects::{RoutingTable, TableSize};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::catch_up::CatchUpPool;
use crate::config::PushConfig;
use crate::event::Event;
use crate::outbox::{Credit, Outbox};
use crate::session::Session;
use crate::stats::PushStats;
use crate::subscription::{Route, Subscription};
use crate::tailer::{Frontier, Tailer, TailerEnd};
use crate::token::TokenKeys;

/// Directory, under the data directory, of the push engine's files.
pub const PUSH_DIR: &str = "push";

/// The subscriptions of one topic and the tailers of its partitions.
pub(crate) struct TopicRoutes {
    pub(crate) topic: Arc<Topic>,
    pub(crate) table: Arc<RoutingTable<Route>>,
    pub(crate) frontiers: Vec<Arc<Frontier>>,
    members: Mutex<HashMap<usize, Arc<Subscription>>>,
    stop: CancellationToken,
}

/// Refused: the broker holds as many sessions as it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the broker holds {max} push sessions, the most it may")]
pub struct TooManySessions {
    /// The limit.
    pub max: usize,
}

/// herald's push engine. One per broker.
pub struct PushEngine {
    pub(crate) broker: Arc<Broker>,
    pub(crate) config: PushConfig,
    topics: Mutex<HashMap<String, Arc<TopicRoutes>>>,
    pub(crate) pool: Arc<CatchUpPool>,
    pub(crate) keys: TokenKeys,
    pub(crate) stats: Arc<PushStats>,
    /// Stops the subject indexer when the engine goes.
    indexer: CancellationToken,
}

impl Drop for PushEngine {
    fn drop(&mut self) {
        self.indexer.cancel();
    }
}

impl std::fmt::Debug for PushEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushEngine")
            .field("topics", &self.topics.lock().len())
            .finish()
    }
}

impl PushEngine {
    /// An engine over `broker`'s topics; reads (or first makes) the token
    /// key in the data directory.
    pub fn new(broker: Arc<Broker>, config: PushConfig) -> std::io::Result<Arc<Self>> {
        let dir = broker.config().data_dir.join(PUSH_DIR);
        let keys = TokenKeys::load_or_create(&dir, config.max_token_bytes, config.token_lifetime)?;
        let stats = Arc::new(PushStats::default());
        let pool = Arc::new(CatchUpPool::new(
            config.catch_up_readers,
            config.read_bytes,
            Arc::clone(&stats),
        ));
        let indexer = CancellationToken::new();
        // Outside a runtime (some tests) there is no indexer: catch-up then
        // reads every block, as with the filters off.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(crate::subject_indexer::run(
                Arc::clone(&broker),
                Arc::clone(&stats),
                indexer.clone(),
            ));
        }
        Ok(Arc::new(Self {
            broker,
            config,
            topics: Mutex::new(HashMap::new()),
            pool,
            keys,
            stats,
            indexer,
        }))
    }

    /// The engine's counters.
    pub fn stats(&self) -> &Arc<PushStats> {
        &self.stats
    }

    /// The engine's limits.
    pub fn config(&self) -> &PushConfig {
        &self.config
    }

    /// The broker it serves.
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// Opens a session with `credit` to spend, or refuses it at the
    /// session limit.
    pub fn open_session(self: &Arc<Self>, credit: Credit) -> Result<Session, TooManySessions> {
        let max = self.config.max_sessions;
        let admitted = self
            .stats
            .sessions
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max as u64).then_some(n + 1)
            });
        if admitted.is_err() {
            PushStats::add(&self.stats.sessions_refused, 1);
            return Err(TooManySessions { max });
        }
        let outbox = Arc::new(
            Outbox::new(self.config.queue_bytes, credit, Arc::clone(&self.stats))
                .with_cut_gate(self.broker.snapshots().shared_gate()),
        );
        Ok(Session::new(Arc::clone(self), outbox))
    }

    /// Routes `subscription` (its cursors all catching up), starting the
    /// topic's tailers if it had no subscriber; answers the frontier of
    /// each partition.
    pub(crate) fn route(&self, subscription: &Arc<Subscription>) -> Vec<Arc<Frontier>> {
        let mut topics = self.topics.lock();
        let name = subscription.topic.name().to_owned();
        let stale = topics
            .get(&name)
            .is_some_and(|routes| routes.topic.id() != subscription.topic.id());
        if stale {
            if let Some(old) = topics.remove(&name) {
                old.stop.cancel();
            }
        }
        // Under `subject.filters=auto`, a topic's filters are kept from its
        // first subscription on.
        for partition in subscription.partitions.iter() {
            if let Some(index) = partition.subject_index() {
                index.activate();
            }
        }
        let routes = topics
            .entry(name)
            .or_insert_with(|| self.start_topic(&subscription.topic, &subscription.partitions));
        routes
            .table
            .insert(&subscription.selector, Route(Arc::clone(subscription)));
        routes
            .members
            .lock()
            .insert(Arc::as_ptr(subscription) as usize, Arc::clone(subscription));
        PushStats::add(&self.stats.subscriptions, 1);
        PushStats::add(&self.stats.cursors, subscription.cursors.len() as u64);
        routes.frontiers.clone()
    }

    /// Stops routing `subscription`; the topic's tailers stop with its last
    /// subscriber.
    pub(crate) fn unroute(&self, subscription: &Arc<Subscription>) {
        let mut topics = self.topics.lock();
        let name = subscription.topic.name();
        let Some(routes) = topics.get(name) else {
            return;
        };
        if routes.topic.id() != subscription.topic.id() {
            return;
        }
        let removed = routes
            .members
            .lock()
            .remove(&(Arc::as_ptr(subscription) as usize))
            .is_some();
        if !removed {
            return;
        }
        routes
            .table
            .remove(&subscription.selector, &Route(Arc::clone(subscription)));
        PushStats::sub(&self.stats.subscriptions, 1);
        PushStats::sub(&self.stats.cursors, subscription.cursors.len() as u64);
        if routes.members.lock().is_empty() {
            routes.stop.cancel();
            topics.remove(name);
        }
    }

    /// The routing tables of every subscribed topic, summed.
    pub fn routing_size(&self) -> TableSize {
        let topics: Vec<_> = self.topics.lock().values().cloned().collect();
        topics.iter().fold(TableSize::default(), |sum, routes| {
            let size = routes.table.size();
            TableSize {
                subjects: sum.subjects + size.subjects,
                literal_routes: sum.literal_routes + size.literal_routes,
                pattern_routes: sum.pattern_routes + size.pattern_routes,
                approximate_bytes: sum.approximate_bytes + size.approximate_bytes,
            }
        })
    }

    fn start_topic(
        &self,
        topic: &Arc<Topic>,
        partitions: &Arc<Vec<Arc<herald_broker::Partition>>>,
    ) -> Arc<TopicRoutes> {
        let table = Arc::new(RoutingTable::new());
        let stop = CancellationToken::new();
        let frontiers: Vec<Arc<Frontier>> = partitions
            .iter()
            .map(|p| Arc::new(Frontier::new(p.watermarks().high_watermark)))
            .collect();
        let routes = Arc::new(TopicRoutes {
            topic: Arc::clone(topic),
            table: Arc::clone(&table),
            frontiers: frontiers.clone(),
            members: Mutex::new(HashMap::new()),
            stop: stop.clone(),
        });
        for (partition, frontier) in partitions.iter().zip(frontiers) {
            let tailer = Tailer {
                topic: Arc::clone(topic),
                partition: Arc::clone(partition),
                table: Arc::clone(&table),
                frontier,
                pool: Arc::clone(&self.pool),
                stats: Arc::clone(&self.stats),
                read_bytes: self.config.read_bytes,
            };
            let routes = Arc::downgrade(&routes);
            let stop = stop.clone();
            tokio::spawn(async move {
                if let TailerEnd::Closed = tailer.run(stop).await {
                    if let Some(routes) = routes.upgrade() {
                        end_all(&routes, "the topic was deleted");
                    }
                }
            });
        }
        routes
    }
}

/// Ends every subscription of a topic that went away.
fn end_all(routes: &TopicRoutes, reason: &str) {
    routes.stop.cancel();
    let members: Vec<_> = routes.members.lock().values().cloned().collect();
    for subscription in members {
        if subscription.is_closed() {
            continue;
        }
        subscription.close();
        subscription.outbox.push_event(Event::Ended {
            subscription_id: subscription.id,
            reason: reason.to_owned(),
        });
    }
}
