//! What a subscription names: one subject exactly, or a pattern.

use crate::pattern::{Pattern, PatternError};

/// The longest literal subject a subscription may name, in bytes: keys
/// can be longer, but a subscription to one is refused rather than stored.
pub const SUBJECT_BYTES_MAX: usize = 4096;

/// The subjects one subscription receives.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Selector {
    /// Exactly the records whose key equals these bytes. Any bytes, dots
    /// and empty tokens included: a literal is compared whole, never split.
    Literal(Box<[u8]>),
    /// The records whose key the pattern matches; it has a wildcard.
    Pattern(Pattern),
}

/// Why a selector was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A literal subject longer than [`SUBJECT_BYTES_MAX`].
    #[error("the subject is {len} bytes long; at most {max} are accepted")]
    SubjectTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A pattern that does not parse.
    #[error("invalid pattern: {0}")]
    Pattern(#[from] PatternError),
}

impl Selector {
    /// A selector for exactly `subject`.
    pub fn literal(subject: &[u8]) -> Result<Self, SelectorError> {
        if subject.len() > SUBJECT_BYTES_MAX {
            return Err(SelectorError::SubjectTooLong {
                len: subject.len(),
                max: SUBJECT_BYTES_MAX,
            });
        }
        Ok(Self::Literal(subject.into()))
    }

    /// Reads what a subscriber wrote: a pattern when a token is exactly
    /// `*` or `>`, otherwise the literal subject (so `a..b`, which no
    /// pattern could name, is still a subject one can subscribe to).
    pub fn parse(text: &[u8]) -> Result<Self, SelectorError> {
        let wildcard = crate::tokens(text).any(|t| t == b"*" || t == b">");
        if !wildcard {
            return Self::literal(text);
        }
        Ok(Self::Pattern(Pattern::parse(text)?))
    }

    /// True if a record with `key` goes to this selector's subscriber.
    pub fn matches(&self, key: &[u8]) -> bool {
        match self {
            Selector::Literal(subject) => &subject[..] == key,
            Selector::Pattern(pattern) => pattern.matches(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_without_a_wildcard_token_is_a_literal_subject() {
        assert_eq!(
            Selector::parse(b"a..b").expect("literal"),
            Selector::Literal(b"a..b"[..].into())
        );
        assert!(Selector::parse(b"user.42")
            .expect("literal")
            .matches(b"user.42"));
        assert!(!Selector::parse(b"user.42")
            .expect("literal")
            .matches(b"user.421"));
        assert!(matches!(
            Selector::parse(b"user.*").expect("pattern"),
            Selector::Pattern(_)
        ));
    }

    #[test]
    fn bad_selectors_are_refused() {
        assert!(matches!(
            Selector::parse(b"a..*"),
            Err(SelectorError::Pattern(PatternError::EmptyToken {
                index: 1
            }))
        ));
        assert!(matches!(
            Selector::literal(&vec![0u8; SUBJECT_BYTES_MAX + 1]),
            Err(SelectorError::SubjectTooLong { .. })
        ));
    }
}
