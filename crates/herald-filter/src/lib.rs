//! Selective delivery: which of the records a subscription's subject or
//! pattern names it actually receives.
//!
//! Two sides, as in RocketSpeed's delivery goals (seed 004, 2.3.2):
//! - the subscriber's [`Filter`], an expression over the record's key and
//!   headers (`header.region == "eu" and header.amount >= 100`), its
//!   timestamp and its value's JSON fields (`value.order.total > 100`),
//!   parsed and checked once and evaluated per record without allocating;
//! - the publisher's audience: a record may name, in its
//!   [`AUDIENCE_HEADER`] header, the attributes of the subscribers it is
//!   for; a subscription declares its [`Attributes`], and a record with an
//!   audience goes only to subscriptions holding one of them.
//!
//! Sans I/O: a record is anything that implements [`Fields`].

mod audience;
mod eval;
mod lexer;
mod parser;

pub use audience::{
    Attributes, AttributesError, ATTRIBUTES_MAX, ATTRIBUTE_BYTES_MAX, AUDIENCE_HEADER,
};
pub use parser::{FieldRef, Filter, FilterError};

/// The most bytes a filter's text may have.
pub const FILTER_BYTES_MAX: usize = 4096;
/// The most tests (comparisons, `exists`, `in`, `starts_with`) one filter
/// may hold.
pub const FILTER_TESTS_MAX: usize = 64;
/// The deepest nesting of `and`, `or`, `not` and parentheses.
pub const FILTER_DEPTH_MAX: usize = 16;
/// The most values one `in (...)` list may hold.
pub const FILTER_IN_VALUES_MAX: usize = 64;

/// What a filter reads of a record.
pub trait Fields {
    /// The record's key (`None`: Kafka's null key).
    fn key(&self) -> Option<&[u8]>;
    /// The value of the first header called `name`: `None` if there is no
    /// such header, `Some(None)` if it is there with a null value.
    fn header(&self, name: &[u8]) -> Option<Option<&[u8]>>;
    /// The record's value (`None`: Kafka's null value, or a reader that
    /// does not give values: push delivery filters on keys and headers).
    fn value(&self) -> Option<&[u8]> {
        None
    }
    /// The record's timestamp in milliseconds, if the reader gives it.
    fn timestamp(&self) -> Option<i64> {
        None
    }
}

/// A stored record (herald-records' view of one record in a batch) as a
/// filter reads it: what push delivery and online queries filter.
impl Fields for herald_records::Record<'_> {
    fn key(&self) -> Option<&[u8]> {
        self.key
    }

    fn header(&self, name: &[u8]) -> Option<Option<&[u8]>> {
        // Malformed header bytes end the search: the record was validated
        // when stored, so this is a damaged log, and such a header is as
        // good as absent.
        self.headers()
            .map_while(Result::ok)
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
    }

    fn value(&self) -> Option<&[u8]> {
        self.value
    }

    fn timestamp(&self) -> Option<i64> {
        Some(self.timestamp)
    }
}
