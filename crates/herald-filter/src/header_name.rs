//! Header names as filters hold them, each with a process-wide id (see
//! [`crate::interner`]).

use crate::interner::Interner;

/// The name of a header a filter tests.
#[derive(Debug, Clone)]
pub struct HeaderName {
    bytes: Box<[u8]>,
    /// `None` once the table of names is full.
    id: Option<u32>,
}

impl PartialEq for HeaderName {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl HeaderName {
    pub(crate) fn new(bytes: Box<[u8]>) -> Self {
        static IDS: Interner<Box<[u8]>> = Interner::new();
        let id = IDS.id(&bytes[..], bytes.len());
        Self { bytes, id }
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The same number for the same name in every filter of the process
    /// (`None` past the table's capacity: such a name is looked up each
    /// time).
    pub fn id(&self) -> Option<u32> {
        self.id
    }
}
