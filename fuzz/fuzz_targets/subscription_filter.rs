//! A subscriber's filter text, then a record to evaluate it on: parsing
//! never panics, a parsed filter written back parses to an equal one that
//! decides the record the same way, and evaluating never panics.
#![no_main]

use herald_filter::{Fields, Filter};
use libfuzzer_sys::fuzz_target;

/// The record: the bytes after the filter text, as a key, as the value of
/// every header whose name is one byte long and in them, and as the
/// record's value (arbitrary bytes read as JSON by `value.` paths); its
/// length is the timestamp.
struct Record<'a>(&'a [u8]);

impl Fields for Record<'_> {
    fn key(&self) -> Option<&[u8]> {
        (!self.0.is_empty()).then_some(self.0)
    }
    fn header(&self, name: &[u8]) -> Option<Option<&[u8]>> {
        match name {
            [b] if self.0.contains(b) => Some(Some(self.0)),
            [b'n'] => Some(None),
            _ => None,
        }
    }
    fn value(&self) -> Option<&[u8]> {
        Some(self.0)
    }
    fn timestamp(&self) -> Option<i64> {
        Some(self.0.len() as i64 - 8)
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte says where the filter ends and the record begins.
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (text, record) = rest.split_at((split as usize).min(rest.len()));
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    if let Ok(filter) = Filter::parse(text) {
        let record = Record(record);
        let decided = filter.matches(&record);
        let canonical = filter.to_string();
        // The canonical form may nest deeper than the text did (it puts
        // every group in parentheses); when it parses, it is the same.
        if let Ok(again) = Filter::parse(&canonical) {
            assert_eq!(again, filter, "{text} -> {canonical}");
            assert_eq!(again.matches(&record), decided);
        }
    }
});
