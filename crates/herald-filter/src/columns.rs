//! A chunk of records read out a field at a time, for the filters of
//! many queries evaluated over the same records (a topic's online
//! queries): each record's timestamp, key and tested headers are found
//! once and laid side by side, so a test over the chunk is a tight loop
//! over one array instead of a search in each record, whichever filter
//! makes it.

use crate::eval::{self, mask_each, Chunk};
use crate::parser::{Comparison, Field, Node, Predicate};
use crate::{Fields, Filter, HeaderName};

/// Most records a [`Columns`] holds (one bit each in a mask).
pub const COLUMN_RECORDS: usize = 64;

/// Most headers a [`Columns`] reads out; tests of others read the
/// records themselves.
const HEADER_COLUMNS_MAX: usize = 16;

/// What a header holds in each record of a chunk, shaped as
/// [`Fields::header`] answers.
type HeaderColumn<'c> = [Option<Option<&'c [u8]>>; COLUMN_RECORDS];

/// Up to [`COLUMN_RECORDS`] records with their timestamps, keys and some
/// headers read out into arrays; built once per chunk and shared by every
/// filter evaluated over it ([`Filter::select_columns`]).
pub struct Columns<'c, R> {
    records: &'c [R],
    /// Bit `i`: record `i` has a timestamp.
    timed: u64,
    timestamps: [i64; COLUMN_RECORDS],
    keys: [Option<&'c [u8]>; COLUMN_RECORDS],
    /// The columns of the headers asked for, by name id.
    headers: Vec<(u32, HeaderColumn<'c>)>,
    /// See [`Columns::time_range`].
    time_range: Option<(i64, i64)>,
}

impl<'c, R: Fields> Columns<'c, R> {
    /// Reads the timestamps, the keys, and the headers called `headers`
    /// (the first [`HEADER_COLUMNS_MAX`] with an id; a test of any other
    /// header reads the records themselves) of the first
    /// [`COLUMN_RECORDS`] of `records`, each record's headers in one pass.
    pub fn new<'h>(records: &'c [R], headers: impl IntoIterator<Item = &'h HeaderName>) -> Self {
        let records = &records[..records.len().min(COLUMN_RECORDS)];
        let mut timed = 0u64;
        let mut timestamps = [0; COLUMN_RECORDS];
        let mut keys = [None; COLUMN_RECORDS];
        for (at, record) in records.iter().enumerate() {
            if let Some(t) = record.timestamp() {
                timestamps[at] = t;
                timed |= 1 << at;
            }
            keys[at] = record.key();
        }
        let mut names: Vec<&HeaderName> = Vec::new();
        for name in headers {
            if names.len() < HEADER_COLUMNS_MAX
                && name.id().is_some()
                && !names.iter().any(|known| known.id() == name.id())
            {
                names.push(name);
            }
        }
        let mut columns: Vec<(u32, HeaderColumn<'c>)> = names
            .iter()
            .map(|name| (name.id().unwrap_or_default(), [None; COLUMN_RECORDS]))
            .collect();
        let mut found = [None; HEADER_COLUMNS_MAX];
        if !names.is_empty() {
            for (at, record) in records.iter().enumerate() {
                record.find_headers(&names, &mut found);
                for ((_, column), value) in columns.iter_mut().zip(found) {
                    column[at] = value;
                }
            }
        }
        let time_range = match records.len() {
            n if n > 0 && timed.count_ones() as usize == n => {
                let timestamps = &timestamps[..n];
                let earliest = timestamps.iter().fold(i64::MAX, |a, &t| a.min(t));
                let latest = timestamps.iter().fold(i64::MIN, |a, &t| a.max(t));
                Some((earliest, latest))
            }
            _ => None,
        };
        Self {
            records,
            timed,
            timestamps,
            keys,
            headers: columns,
            time_range,
        }
    }

    /// The records.
    pub fn records(&self) -> &'c [R] {
        self.records
    }

    /// The earliest and the latest timestamp of the records; `None` if
    /// there are none or one has no timestamp.
    pub fn time_range(&self) -> Option<(i64, i64)> {
        self.time_range
    }

    fn header_column(&self, name: &HeaderName) -> Option<&HeaderColumn<'c>> {
        let id = name.id()?;
        self.headers
            .iter()
            .find(|(known, _)| *known == id)
            .map(|(_, column)| column)
    }

    /// The records whose timestamp passes `comparison` against `n`,
    /// computed for all of them without a branch per record.
    fn timestamps_where(&self, comparison: Comparison, n: f64) -> u64 {
        let timestamps = &self.timestamps[..self.records.len()];
        let mask = match comparison {
            Comparison::Lt => mask_each(timestamps, |&t| (t as f64) < n),
            Comparison::Le => mask_each(timestamps, |&t| (t as f64) <= n),
            Comparison::Gt => mask_each(timestamps, |&t| (t as f64) > n),
            Comparison::Ge => mask_each(timestamps, |&t| (t as f64) >= n),
        };
        mask & self.timed
    }
}

impl<R: Fields> Chunk for Columns<'_, R> {
    fn len(&self) -> usize {
        self.records.len()
    }

    fn test(&self, field: &Field, predicate: &Predicate, candidates: u64) -> u64 {
        match (field, predicate) {
            (Field::Timestamp, Predicate::Compare(comparison, n)) => {
                candidates & self.timestamps_where(*comparison, *n)
            }
            (Field::Key, predicate) => {
                let keys = &self.keys[..self.records.len()];
                predicate.select::<true, _>(keys, candidates, |key| key.map(Some))
            }
            (Field::Header(name), predicate) => match self.header_column(name) {
                Some(column) => predicate.select::<true, _>(
                    &column[..self.records.len()],
                    candidates,
                    |found| *found,
                ),
                None => self.records.test(field, predicate, candidates),
            },
            _ => self.records.test(field, predicate, candidates),
        }
    }
}

impl Filter {
    /// [`Filter::select`] over records read out into `columns`: the same
    /// answer, with each test a loop over one of their arrays.
    pub fn select_columns<R: Fields>(&self, columns: &Columns<'_, R>, candidates: u64) -> u64 {
        eval::select_in(&self.root, columns, candidates)
    }

    /// The headers the filter tests, once each, for [`Columns::new`].
    pub fn header_names(&self) -> Vec<&HeaderName> {
        fn walk<'f>(node: &'f Node, names: &mut Vec<&'f HeaderName>) {
            match node {
                Node::All(nodes) | Node::Any(nodes) => {
                    nodes.iter().for_each(|node| walk(node, names));
                }
                Node::Not(node) => walk(node, names),
                Node::Test(Field::Header(name), _) => {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                Node::Test(..) => {}
            }
        }
        let mut names = Vec::new();
        walk(&self.root, &mut names);
        names
    }
}
