//! A chunk of records read out a field at a time, for the filters of
//! many queries evaluated over the same records (a topic's online
//! queries): each record's timestamp, key and tested headers are found
//! once and laid side by side, so a test over the chunk is a tight loop
//! over one array instead of a search in each record, whichever filter
//! makes it.

use crate::bytes_column::BytesColumn;
use crate::eval::{self, Chunk};
use crate::parser::{Comparison, Field, Node, Predicate};
use crate::{Fields, Filter, HeaderName};

/// Most records a [`Columns`] holds (one bit each in a mask).
pub const COLUMN_RECORDS: usize = 64;

/// Most headers a [`Columns`] reads out; tests of others read the
/// records themselves.
const HEADER_COLUMNS_MAX: usize = 16;

/// Up to [`COLUMN_RECORDS`] records with their timestamps, keys and some
/// headers read out into arrays; read once per chunk and shared by every
/// filter evaluated over it ([`Filter::select_columns`]), then read again
/// for the next chunk of the same records (the arrays reused).
pub struct Columns<'c, R> {
    records: &'c [R],
    /// Bit `i`: record `i` has a timestamp.
    timed: u64,
    timestamps: [i64; COLUMN_RECORDS],
    keys: BytesColumn<'c>,
    /// The headers read out, each with an id and once.
    names: Vec<&'c HeaderName>,
    /// Their columns, in the same order.
    headers: Vec<BytesColumn<'c>>,
    /// See [`Columns::time_range`].
    time_range: Option<(i64, i64)>,
}

impl<'c, R: Fields> Columns<'c, R> {
    /// Columns for the timestamps, the keys, and the headers called
    /// `headers` (the first `HEADER_COLUMNS_MAX` with an id; a test of
    /// any other header reads the records themselves), holding no records
    /// until [`Columns::read`].
    pub fn new(headers: impl IntoIterator<Item = &'c HeaderName>) -> Self {
        let mut names: Vec<&'c HeaderName> = Vec::new();
        for name in headers {
            if names.len() < HEADER_COLUMNS_MAX
                && name.id().is_some()
                && !names.iter().any(|known| known.id() == name.id())
            {
                names.push(name);
            }
        }
        let headers = names.iter().map(|_| BytesColumn::new()).collect();
        Self {
            records: &[],
            timed: 0,
            timestamps: [0; COLUMN_RECORDS],
            keys: BytesColumn::new(),
            names,
            headers,
            time_range: None,
        }
    }

    /// Reads out the first [`COLUMN_RECORDS`] of `records` in place of
    /// what the columns held, each record's headers in one pass.
    pub fn read(&mut self, records: &'c [R]) {
        let records = &records[..records.len().min(COLUMN_RECORDS)];
        self.records = records;
        self.keys.clear();
        for column in &mut self.headers {
            column.clear();
        }
        let mut timed = 0u64;
        for (at, record) in records.iter().enumerate() {
            if let Some(t) = record.timestamp() {
                self.timestamps[at] = t;
                timed |= 1 << at;
            }
            self.keys.push(record.key().map(Some));
        }
        self.timed = timed;
        if !self.names.is_empty() {
            let mut found = [None; HEADER_COLUMNS_MAX];
            for record in records {
                record.find_headers(&self.names, &mut found);
                for (column, value) in self.headers.iter_mut().zip(&found) {
                    column.push(*value);
                }
            }
        }
        self.time_range = match records.len() {
            n if n > 0 && timed.count_ones() as usize == n => {
                let timestamps = &self.timestamps[..n];
                let earliest = timestamps.iter().fold(i64::MAX, |a, &t| a.min(t));
                let latest = timestamps.iter().fold(i64::MIN, |a, &t| a.max(t));
                Some((earliest, latest))
            }
            _ => None,
        };
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

    fn header_column(&self, name: &HeaderName) -> Option<&BytesColumn<'c>> {
        let id = name.id()?;
        let at = self.names.iter().position(|known| known.id() == Some(id))?;
        self.headers.get(at)
    }

    /// The records whose timestamp passes `comparison` against `n`,
    /// computed for all of them without a branch per record (all the
    /// places in a loop of a fixed count, which the compiler unrolls;
    /// `timed` drops those past the records).
    fn timestamps_where(&self, comparison: Comparison, n: f64) -> u64 {
        let mask = match comparison {
            Comparison::Lt => self.timestamps_each(|t| t < n),
            Comparison::Le => self.timestamps_each(|t| t <= n),
            Comparison::Gt => self.timestamps_each(|t| t > n),
            Comparison::Ge => self.timestamps_each(|t| t >= n),
        };
        mask & self.timed
    }

    #[inline]
    fn timestamps_each(&self, test: impl Fn(f64) -> bool) -> u64 {
        let mut mask = 0;
        for at in 0..COLUMN_RECORDS {
            mask |= u64::from(test(self.timestamps[at] as f64)) << at;
        }
        mask
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
            (Field::Key, predicate) => self.keys.select(predicate, candidates),
            (Field::Header(name), predicate) => match self.header_column(name) {
                Some(column) => column.select(predicate, candidates),
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
