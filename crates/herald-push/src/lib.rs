//! herald's push engine: subscriptions to subjects delivered as records
//! arrive, resumed from the log.
//!
//! A subscription is a cursor in the log, not a queue. Each partition with
//! subscribers has one tailer that reads every new batch once and queues a
//! shared reference to each record for every live subscription whose
//! selector matches its key (the topic's [`herald_subjects::RoutingTable`]).
//! Each session has one outbox bounded in bytes; when it is full, or the
//! client's credit is spent, the subscription's cursor leaves live delivery
//! and a catch-up reader continues from the log at the client's pace until
//! it reaches the tailer again. Publishers and other subscribers are never
//! slowed by a slow one, and nothing is dropped: records a subscriber will
//! not get (removed by retention, or past its lag limit) are reported as a
//! gap.
//!
//! Every subscribe and publish is checked against the broker's ACLs for
//! the session's [`Identity`] (READ, WRITE on the topic).
//!
//! Transports (gRPC, WebSocket, SSE) drive a [`Session`] and drain its
//! [`Outbox`]; this crate knows nothing of them.

mod batches;
mod catch_up;
mod config;
mod durable;
mod engine;
mod error;
mod event;
mod expiry;
mod identity;
mod last;
mod outbox;
mod priority;
mod publish;
mod run;
mod selection;
mod session;
mod stats;
mod subject_indexer;
mod subscription;
mod tailer;
mod token;

pub use config::PushConfig;
pub use durable::{check_name, stored_positions, StoreError, GROUP_PREFIX, NAME_BYTES_MAX};
pub use engine::{PushEngine, TooManySessions, PUSH_DIR};
pub use error::{AckError, PublishError, SubscribeError};
pub use event::{Delivery, Event, GapReason, SharedRecord, DELIVERY_OVERHEAD_BYTES};
pub use expiry::{EXPIRES_AT_HEADER, TTL_HEADER};
pub use identity::{Identity, ANONYMOUS};
pub use last::LAST_SCAN_RECORDS_MAX;
pub use outbox::{Credit, Outbox, Refusal};
pub use priority::PRIORITY_HEADER;
pub use publish::{PreparedPublish, PublishRecord, Published};
pub use selection::Selection;
pub use session::{Session, Start, SubscribeRequest};
pub use stats::PushStats;
pub use subscription::{AckMode, Subscription};
pub use token::{ResumePoint, TokenError, TokenKeys};
