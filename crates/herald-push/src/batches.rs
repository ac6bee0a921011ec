//! The records of what a partition read returned, as shareable slices:
//! each batch decompressed once, into one buffer its records point into.

use bytes::Bytes;
use herald_records::{
    decompress_into, BatchHeader, Compression, RecordBatch, RecordError, Records, HEADER_BYTES,
};

/// One batch of a read, ready to iterate.
pub(crate) struct DecodedBatch {
    batch: Bytes,
    /// The plain records section: a slice of `batch`, or the one buffer it
    /// was decompressed into.
    section: Bytes,
}

impl DecodedBatch {
    /// The batch's header.
    pub(crate) fn header(&self) -> BatchHeader<'_> {
        // `decode` checked the framing, so the header parses.
        BatchHeader::parse(&self.batch).expect("a decoded batch has a header")
    }

    /// The buffer the records' fields are slices of.
    pub(crate) fn section(&self) -> &Bytes {
        &self.section
    }

    /// The batch's records, in order.
    pub(crate) fn records(&self) -> Records<'_> {
        Records::new(&self.header(), &self.section)
    }

    /// Offset following the batch's last record.
    pub(crate) fn end_offset(&self) -> u64 {
        u64::try_from(self.header().last_offset()).map_or(0, |last| last + 1)
    }
}

/// The data batches of `bytes` (whole batches as a read returned them),
/// control batches skipped. Stored batches were validated on the way in,
/// so an error here means damaged storage: the caller stops there.
pub(crate) fn decode(
    bytes: &Bytes,
) -> impl Iterator<Item = Result<DecodedBatch, RecordError>> + '_ {
    herald_records::batches(bytes).filter_map(move |batch| {
        let batch = match batch {
            Ok(batch) => batch,
            Err(e) => return Some(Err(e.into())),
        };
        let view = match RecordBatch::new(batch) {
            Ok(view) => view,
            Err(e) => return Some(Err(e.into())),
        };
        let header = view.header();
        if header.is_control() {
            return None;
        }
        let batch = bytes.slice_ref(batch);
        let section = match Compression::from_id(header.compression()) {
            Ok(Compression::None) => batch.slice(HEADER_BYTES..),
            Ok(codec) => {
                let mut plain = Vec::new();
                if let Err(e) = decompress_into(codec, &batch[HEADER_BYTES..], &mut plain) {
                    return Some(Err(e.into()));
                }
                Bytes::from(plain)
            }
            Err(e) => return Some(Err(e.into())),
        };
        Some(Ok(DecodedBatch { batch, section }))
    })
}
