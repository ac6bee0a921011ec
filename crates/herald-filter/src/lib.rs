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
mod bytes;
mod bytes_column;
mod columns;
mod eval;
mod header_name;
mod interner;
mod json_object;
mod json_path;
mod lexer;
mod parser;

pub use audience::{
    Attributes, AttributesError, ATTRIBUTES_MAX, ATTRIBUTE_BYTES_MAX, AUDIENCE_HEADER,
};
pub use columns::{Columns, COLUMN_RECORDS};
pub use eval::selected;
pub use header_name::HeaderName;
pub use json_path::JsonPath;
pub use parser::{FieldRef, Filter, FilterError};

use std::cell::{Cell, OnceCell};

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
    /// [`Fields::header`] for each of `names` at once, into the same place
    /// of `found` (as many as both hold): for a reader that can find them
    /// all in one pass over the record's headers.
    fn find_headers<'s>(&'s self, names: &[&HeaderName], found: &mut [Option<Option<&'s [u8]>>]) {
        for (name, slot) in names.iter().zip(found.iter_mut()) {
            *slot = self.header(name.as_bytes());
        }
    }
    /// The record's value (`None`: Kafka's null value, or a reader that
    /// does not give values: push delivery filters on keys and headers).
    fn value(&self) -> Option<&[u8]> {
        None
    }
    /// The record's timestamp in milliseconds, if the reader gives it.
    fn timestamp(&self) -> Option<i64> {
        None
    }
    /// The JSON field at `path` of the value, for a reader that keeps
    /// what it looked up (a record many filters are evaluated against):
    /// `Some` with the field shaped as [`Fields::header`] answers, `None`
    /// to have the filter read it from [`Fields::value`] itself.
    fn kept_json_field(&self, path: &JsonPath) -> Option<Option<Option<&[u8]>>> {
        let _ = path;
        None
    }
    /// The JSON field at `path` of the value as a finite number, for a
    /// reader that keeps what it parsed (many queries summing or comparing
    /// the same field): `Some` with the number (`None`: not a number, or
    /// absent), `None` to have it read through [`Fields::kept_json_field`].
    fn kept_json_number(&self, path: &JsonPath) -> Option<Option<f64>> {
        let _ = path;
        None
    }
}

/// Most JSON fields [`DecodedRecord`] keeps; more are looked up each time.
const KEPT_JSON_FIELDS_MAX: usize = 8;

/// What a JSON field kept by [`DecodedRecord`] holds.
type KeptJson<'a> = Option<Option<&'a [u8]>>;

/// A stored record for evaluating many filters and aggregates against
/// (the online queries of a topic): each JSON field of its value is
/// parsed out once, when a filter or an aggregate first reads it, and
/// kept for the others. Its headers are read from its bytes: the tests of
/// many filters read them out once per record into [`Columns`].
#[derive(Debug, Clone)]
pub struct DecodedRecord<'a> {
    record: herald_records::Record<'a>,
    /// What JSON lookups found, made at the first: a record only filtered
    /// on its key and headers carries none of it (a chunk of records is
    /// moved about whole).
    json: OnceCell<Box<JsonLookups<'a>>>,
}

/// The JSON fields of a record's value looked up so far.
#[derive(Debug, Clone)]
struct JsonLookups<'a> {
    /// The path ids of the kept fields (apart from what they hold: a
    /// search reads only these).
    ids: [Cell<u32>; KEPT_JSON_FIELDS_MAX],
    /// What each kept field holds.
    kept: [Cell<KeptJson<'a>>; KEPT_JSON_FIELDS_MAX],
    /// Each kept field read as a number, once asked for (`None`: not yet).
    numbers: [Cell<Option<Option<f64>>>; KEPT_JSON_FIELDS_MAX],
    count: Cell<usize>,
    /// The value's top-level fields.
    top_level: json_object::TopLevel<'a>,
}

impl<'a> DecodedRecord<'a> {
    /// `record`, with nothing looked up yet.
    pub fn new(record: herald_records::Record<'a>) -> Self {
        Self {
            record,
            json: OnceCell::new(),
        }
    }

    /// The record.
    pub fn record(&self) -> &herald_records::Record<'a> {
        &self.record
    }
}

impl Fields for DecodedRecord<'_> {
    fn key(&self) -> Option<&[u8]> {
        self.record.key
    }

    fn header(&self, name: &[u8]) -> Option<Option<&[u8]>> {
        self.record.header(name)
    }

    fn find_headers<'s>(&'s self, names: &[&HeaderName], found: &mut [Option<Option<&'s [u8]>>]) {
        self.record.find_headers(names, found);
    }

    fn value(&self) -> Option<&[u8]> {
        self.record.value
    }

    fn timestamp(&self) -> Option<i64> {
        Some(self.record.timestamp)
    }

    fn kept_json_field(&self, path: &JsonPath) -> Option<Option<Option<&[u8]>>> {
        let (json, at) = self.kept_json(path)?;
        Some(json.kept[at].get())
    }

    fn kept_json_number(&self, path: &JsonPath) -> Option<Option<f64>> {
        let (json, at) = self.kept_json(path)?;
        if let Some(number) = json.numbers[at].get() {
            return Some(number);
        }
        let number = json.kept[at].get().flatten().and_then(eval::number);
        json.numbers[at].set(Some(number));
        Some(number)
    }
}

impl<'a> DecodedRecord<'a> {
    /// The lookups of this record's value, and where the field at `path`
    /// is kept among them (looked up now if it was not); `None` if it is
    /// not kept (no value, a path without an id, the table full, a string
    /// whose text differs from its bytes).
    fn kept_json(&self, path: &JsonPath) -> Option<(&JsonLookups<'a>, usize)> {
        let id = path.id?;
        let value = self.record.value?;
        let json = self.json.get_or_init(|| {
            Box::new(JsonLookups {
                ids: Default::default(),
                kept: Default::default(),
                numbers: Default::default(),
                count: Cell::new(0),
                top_level: json_object::TopLevel::scan(value),
            })
        });
        let kept = json.count.get();
        if let Some(at) = json.ids[..kept].iter().position(|kept| kept.get() == id) {
            return Some((json, at));
        }
        if kept == KEPT_JSON_FIELDS_MAX {
            return None;
        }
        let (first, rest) = path.steps.split_first()?;
        let found = match json.top_level.get(first) {
            Some(Some(field)) => eval::borrowed_json_field(field, rest)?,
            Some(None) => None,
            None => eval::borrowed_json_field(value, &path.steps)?,
        };
        json.ids[kept].set(id);
        json.kept[kept].set(found);
        json.count.set(kept + 1);
        Some((json, kept))
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

    fn find_headers<'s>(&'s self, names: &[&HeaderName], found: &mut [Option<Option<&'s [u8]>>]) {
        let wanted = names.len().min(found.len());
        let found = &mut found[..wanted];
        found.fill(None);
        let mut missing = wanted;
        if missing == 0 {
            return;
        }
        for (key, value) in self.headers().map_while(Result::ok) {
            for (name, slot) in names.iter().zip(found.iter_mut()) {
                // The first header of a name is the one a filter reads.
                if slot.is_none() && bytes::same(name.as_bytes(), key) {
                    *slot = Some(value);
                    missing -= 1;
                }
            }
            if missing == 0 {
                break;
            }
        }
    }

    fn value(&self) -> Option<&[u8]> {
        self.value
    }

    fn timestamp(&self) -> Option<i64> {
        Some(self.timestamp)
    }
}
