//! What a registered query asks for, as it is written (JSON over the admin
//! API, or the CLI's flags), and its checked, compiled form.

use herald_filter::{FieldRef, Filter, FilterError};
use serde::{Deserialize, Serialize};

/// Longest query id.
pub const QUERY_ID_MAX: usize = 64;
/// Most aggregates one query may compute.
pub const AGGREGATES_MAX: usize = 16;
/// Most triggers one query may hold.
pub const TRIGGERS_MAX: usize = 16;
/// Most buckets a query keeps (older ones are dropped).
pub const RETAIN_BUCKETS_MAX: usize = 100_000;
/// The buckets a query keeps unless it says otherwise.
pub const RETAIN_BUCKETS_DEFAULT: usize = 1_440;

/// A query as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuerySpec {
    /// Its id: 1 to 64 of `[A-Za-z0-9_-]`.
    pub id: String,
    /// The topic it follows.
    pub topic: String,
    /// Which records count (herald's filter language); every record when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// Width of the time buckets aggregates are kept in, by record
    /// timestamp, in milliseconds.
    pub bucket_ms: u64,
    /// How many buckets are kept, the newest (at most 100,000).
    #[serde(default = "default_retain")]
    pub retain_buckets: usize,
    /// What is computed per bucket.
    #[serde(default)]
    pub aggregates: Vec<AggregateSpec>,
    /// Conditions over the aggregates that raise alerts.
    #[serde(default)]
    pub triggers: Vec<TriggerSpec>,
}

fn default_retain() -> usize {
    RETAIN_BUCKETS_DEFAULT
}

/// One aggregate as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregateSpec {
    /// Its name in results and triggers.
    pub name: String,
    /// What it computes.
    pub function: Function,
    /// The field it reads (`value.total`, `header.amount`, `key`, ...);
    /// none for `count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// What an aggregate computes over the records of a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Function {
    /// How many records matched.
    Count,
    /// The sum of the field's numbers (records whose field is not a
    /// number are passed over).
    Sum,
    /// The smallest of the field's numbers.
    Min,
    /// The largest of the field's numbers.
    Max,
    /// How many distinct values the field took (approximate:
    /// HyperLogLog, about 2.3% standard error).
    Distinct,
}

/// One trigger as written: `aggregate op threshold` over the last
/// `window_ms` of buckets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerSpec {
    /// Its name in alerts.
    pub name: String,
    /// The aggregate it watches.
    pub aggregate: String,
    /// The comparison.
    pub op: Comparison,
    /// What the aggregate is compared with.
    pub threshold: f64,
    /// The window, in milliseconds: a whole number of buckets.
    pub window_ms: u64,
}

/// A trigger's comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Comparison {
    /// Greater than.
    #[serde(rename = ">")]
    Gt,
    /// At least.
    #[serde(rename = ">=")]
    Ge,
    /// Less than.
    #[serde(rename = "<")]
    Lt,
    /// At most.
    #[serde(rename = "<=")]
    Le,
}

impl Comparison {
    /// Whether `value op threshold` holds.
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Comparison::Gt => value > threshold,
            Comparison::Ge => value >= threshold,
            Comparison::Lt => value < threshold,
            Comparison::Le => value <= threshold,
        }
    }
}

/// Why a query was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// The id breaks the rules.
    #[error("query id {id:?} is invalid: {reason}")]
    InvalidId {
        /// The id.
        id: String,
        /// Which rule.
        reason: &'static str,
    },
    /// The filter does not parse.
    #[error("the filter is invalid: {0}")]
    Filter(FilterError),
    /// An aggregate's field does not parse.
    #[error("aggregate {name}: the field is invalid: {error}")]
    Field {
        /// The aggregate.
        name: String,
        /// Why.
        error: FilterError,
    },
    /// Something else about the query is wrong.
    #[error("{0}")]
    Invalid(String),
}

/// A checked query.
#[derive(Debug, Clone)]
pub struct CompiledQuery {
    /// As written.
    pub spec: QuerySpec,
    pub(crate) filter: Option<Filter>,
    pub(crate) aggregates: Vec<CompiledAggregate>,
    pub(crate) triggers: Vec<CompiledTrigger>,
}

#[derive(Debug, Clone)]
pub(crate) struct CompiledAggregate {
    pub(crate) function: Function,
    pub(crate) field: Option<FieldRef>,
}

#[derive(Debug, Clone)]
pub(crate) struct CompiledTrigger {
    pub(crate) aggregate: usize,
    pub(crate) op: Comparison,
    pub(crate) threshold: f64,
    pub(crate) window_buckets: u64,
}

impl QuerySpec {
    /// Checks the query and compiles its filter and fields.
    pub fn compile(self) -> Result<CompiledQuery, SpecError> {
        validate_id(&self.id)?;
        let invalid = |message: String| Err(SpecError::Invalid(message));
        if self.topic.is_empty() {
            return invalid("a query names its topic".into());
        }
        if self.bucket_ms == 0 || self.bucket_ms > 366 * 86_400_000 {
            return invalid("bucket_ms must be between 1 ms and a year".into());
        }
        if self.retain_buckets == 0 || self.retain_buckets > RETAIN_BUCKETS_MAX {
            return invalid(format!(
                "retain_buckets must be between 1 and {RETAIN_BUCKETS_MAX}"
            ));
        }
        if self.aggregates.len() > AGGREGATES_MAX {
            return invalid(format!("at most {AGGREGATES_MAX} aggregates"));
        }
        if self.triggers.len() > TRIGGERS_MAX {
            return invalid(format!("at most {TRIGGERS_MAX} triggers"));
        }
        let filter = match &self.filter {
            Some(text) => Some(Filter::parse(text).map_err(SpecError::Filter)?),
            None => None,
        };
        let mut aggregates = Vec::with_capacity(self.aggregates.len());
        for (i, a) in self.aggregates.iter().enumerate() {
            if a.name.is_empty() || self.aggregates[..i].iter().any(|b| b.name == a.name) {
                return invalid(format!(
                    "aggregate names must be given and unique: {:?}",
                    a.name
                ));
            }
            let field = match (&a.field, a.function) {
                (None, Function::Count) => None,
                (Some(_), Function::Count) => {
                    return invalid(format!("aggregate {}: count takes no field", a.name))
                }
                (None, _) => {
                    return invalid(format!(
                        "aggregate {}: {:?} needs a field",
                        a.name, a.function
                    ))
                }
                (Some(text), _) => {
                    Some(FieldRef::parse(text).map_err(|error| SpecError::Field {
                        name: a.name.clone(),
                        error,
                    })?)
                }
            };
            aggregates.push(CompiledAggregate {
                function: a.function,
                field,
            });
        }
        let mut triggers = Vec::with_capacity(self.triggers.len());
        for (i, t) in self.triggers.iter().enumerate() {
            if t.name.is_empty() || self.triggers[..i].iter().any(|u| u.name == t.name) {
                return invalid(format!(
                    "trigger names must be given and unique: {:?}",
                    t.name
                ));
            }
            let Some(aggregate) = self.aggregates.iter().position(|a| a.name == t.aggregate) else {
                return invalid(format!(
                    "trigger {}: no aggregate named {:?}",
                    t.name, t.aggregate
                ));
            };
            if !t.threshold.is_finite() {
                return invalid(format!("trigger {}: the threshold is not a number", t.name));
            }
            if t.window_ms == 0 || t.window_ms % self.bucket_ms != 0 {
                return invalid(format!(
                    "trigger {}: window_ms must be a whole number of buckets ({} ms)",
                    t.name, self.bucket_ms
                ));
            }
            let window_buckets = t.window_ms / self.bucket_ms;
            if window_buckets > self.retain_buckets as u64 {
                return invalid(format!(
                    "trigger {}: the window is longer than the buckets kept",
                    t.name
                ));
            }
            triggers.push(CompiledTrigger {
                aggregate,
                op: t.op,
                threshold: t.threshold,
                window_buckets,
            });
        }
        Ok(CompiledQuery {
            spec: self,
            filter,
            aggregates,
            triggers,
        })
    }
}

/// Checks a query id: 1 to 64 of `[A-Za-z0-9_-]`.
pub fn validate_id(id: &str) -> Result<(), SpecError> {
    id_problem(id).map_or(Ok(()), |reason| {
        Err(SpecError::InvalidId {
            id: id.to_owned(),
            reason,
        })
    })
}

/// What is wrong with `id` as the id of something the broker keeps by
/// name (a query, a snapshot): it must be 1 to 64 of `[A-Za-z0-9_-]` (no
/// `.`, which would end it inside a view topic's name).
pub fn id_problem(id: &str) -> Option<&'static str> {
    if id.is_empty() {
        return Some("it is empty");
    }
    if id.len() > QUERY_ID_MAX {
        return Some("it is longer than 64 characters");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Some("only ASCII letters, digits, '_' and '-' are allowed");
    }
    None
}
