//! Rate limits and flow control for herald, without I/O: every type here
//! takes the time as an argument (nanoseconds on a monotonic clock the
//! caller owns), so that tests drive them with exact clocks and expect
//! exact decisions.
//!
//! - [`bucket`]: a token bucket (GCRA) per principal or tenant: quotas and
//!   SLAs in bytes or messages per second, with a burst, in two modes:
//!   throttle (accept and say how long to pause, as Kafka does) and reject
//!   (refuse and say when to retry, as seed 004 asks).
//! - [`quotas`]: Kafka's client quotas (by user, client id, IP) and
//!   herald's tenant SLAs, as stored: validated as Kafka validates
//!   AlterClientQuotas, matched as DescribeClientQuotas matches.
//! - [`sla`]: the quotas and SLAs in force: buckets shared by every
//!   connection of an entity, on every front end, and what a charge
//!   decides (go, throttle, refuse).
//! - [`window`]: Little's law over the last N messages served: throughput
//!   λ, mean latency W, and the in-flight estimate L = λW.
//! - [`controller`]: controllers that move an in-flight limit from those
//!   measurements: seed 004's Last Three Points and Adaptive, and a
//!   gradient controller of the kind Netflix's concurrency-limits uses.

pub mod bucket;
pub mod controller;
pub mod quotas;
pub mod sla;
pub mod window;

pub use bucket::{Admission, TokenBucket};
pub use controller::{Adaptive, Gradient, LastThreePoints, LimitController, Sample};
pub use quotas::{EntityType, QuotaEntity, QuotaError, QuotaOp, QuotaState};
pub use sla::{OverRate, QuotaBuckets, Refusal, TenantRates, Verdict};
pub use window::{LittleWindow, Measurement};
