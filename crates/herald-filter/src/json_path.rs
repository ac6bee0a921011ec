//! JSON paths into a record's value, each with a process-wide id: the
//! same path written in two filters gets the same id, so a reader that
//! keeps what it looked up in a record (`DecodedRecord`) answers the
//! second filter from the first one's lookup.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Distinct paths given an id; past it new paths go without one (and are
/// looked up every time), so filters written by clients cannot grow the
/// table without bound.
const PATH_IDS_MAX: usize = 1 << 16;

/// A path of object keys into the value read as JSON.
#[derive(Debug, Clone)]
pub struct JsonPath {
    pub(crate) steps: Box<[Box<[u8]>]>,
    /// `None` once [`PATH_IDS_MAX`] paths have ids.
    pub(crate) id: Option<u32>,
}

impl PartialEq for JsonPath {
    fn eq(&self, other: &Self) -> bool {
        self.steps == other.steps
    }
}

impl JsonPath {
    pub(crate) fn new(steps: Box<[Box<[u8]>]>) -> Self {
        let id = intern(&steps);
        Self { steps, id }
    }
}

/// Every path given an id, with its id.
type PathIds = HashMap<Box<[Box<[u8]>]>, u32>;

fn intern(steps: &[Box<[u8]>]) -> Option<u32> {
    static IDS: OnceLock<Mutex<PathIds>> = OnceLock::new();
    let mut ids = IDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(&id) = ids.get(steps) {
        return Some(id);
    }
    if ids.len() >= PATH_IDS_MAX {
        return None;
    }
    let id = ids.len() as u32;
    ids.insert(steps.into(), id);
    Some(id)
}
