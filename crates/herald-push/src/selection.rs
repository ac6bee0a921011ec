//! Selective delivery on the push path: of the records a subscription's
//! selector routes to it, which it receives (its filter, and the
//! publisher's audience).

use herald_filter::{Attributes, Fields, Filter, AUDIENCE_HEADER};
use herald_records::Record;

/// What a subscription asks of a record beyond its subject: a filter over
/// its key and headers, and the attributes a record's audience may name.
/// The default admits every record without an audience.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    filter: Option<Filter>,
    /// The filter as the client wrote it, for resume tokens.
    filter_text: Option<Box<str>>,
    attributes: Attributes,
}

impl Selection {
    /// A selection of the filter `filter_text` (none or empty: every
    /// record) for a subscriber with `attributes`.
    pub fn new(
        filter_text: Option<&str>,
        attributes: Attributes,
    ) -> Result<Self, herald_filter::FilterError> {
        let filter_text = filter_text.filter(|t| !t.trim().is_empty());
        Ok(Self {
            filter: filter_text.map(Filter::parse).transpose()?,
            filter_text: filter_text.map(Into::into),
            attributes,
        })
    }

    /// The filter, if any.
    pub fn filter(&self) -> Option<&Filter> {
        self.filter.as_ref()
    }

    /// The filter's text as the client wrote it, if any.
    pub fn filter_text(&self) -> Option<&str> {
        self.filter_text.as_deref()
    }

    /// The subscriber's attributes.
    pub fn attributes(&self) -> &Attributes {
        &self.attributes
    }

    /// True if the subscription receives `record` (one its selector
    /// matched). Reads only the headers it needs and allocates nothing.
    pub(crate) fn admits(&self, record: &Record<'_>) -> bool {
        if record.header_count() > 0 {
            let audience = record.header(AUDIENCE_HEADER).flatten();
            if !self.attributes.admits(audience) {
                return false;
            }
        }
        self.filter.as_ref().is_none_or(|f| f.matches(record))
    }
}
