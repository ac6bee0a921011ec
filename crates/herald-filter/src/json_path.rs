//! JSON paths into a record's value, each with a process-wide id (see
//! [`crate::interner`]).

use crate::interner::Interner;

/// A path of object keys into the value read as JSON.
#[derive(Debug, Clone)]
pub struct JsonPath {
    pub(crate) steps: Box<[Box<[u8]>]>,
    /// `None` once the table of paths is full.
    pub(crate) id: Option<u32>,
}

impl PartialEq for JsonPath {
    fn eq(&self, other: &Self) -> bool {
        self.steps == other.steps
    }
}

impl JsonPath {
    pub(crate) fn new(steps: Box<[Box<[u8]>]>) -> Self {
        static IDS: Interner<Box<[Box<[u8]>]>> = Interner::new();
        let id = IDS.id(&steps[..], steps.iter().map(|step| step.len()).sum());
        Self { steps, id }
    }
}
