//! What the filter tests evaluate filters against.

use herald_filter::Fields;

/// A record: a key and headers, the first of a name counting, a value
/// (JSON or not) and a timestamp.
#[derive(Debug, Clone)]
pub struct Record {
    pub key: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub value: Option<Vec<u8>>,
    pub timestamp: i64,
}

impl Fields for Record {
    fn key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }
    fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }
    fn timestamp(&self) -> Option<i64> {
        Some(self.timestamp)
    }
    fn header(&self, name: &[u8]) -> Option<Option<&[u8]>> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_deref())
    }
}
