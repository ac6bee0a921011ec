//! A subject pattern: its grammar, its limits and its matcher.

use crate::{tokens, TOKEN_SEPARATOR};

/// The longest pattern accepted, in bytes. Bounds what one subscription
/// can make the broker store and walk per record.
pub const PATTERN_BYTES_MAX: usize = 1024;

/// The most tokens a pattern may have.
pub const PATTERN_TOKENS_MAX: usize = 64;

/// One token of a pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Token {
    /// Matches a key token equal to these bytes.
    Literal(Box<[u8]>),
    /// `*`: matches any one token.
    One,
    /// `>` (last only): matches one or more remaining tokens.
    Rest,
}

/// Why a pattern was refused. Each names what the subscriber must change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The pattern is empty.
    #[error("the pattern is empty")]
    Empty,
    /// The pattern is longer than [`PATTERN_BYTES_MAX`].
    #[error("the pattern is {len} bytes long; at most {max} are accepted")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The pattern has more than [`PATTERN_TOKENS_MAX`] tokens.
    #[error("the pattern has more than {max} tokens")]
    TooManyTokens {
        /// The limit.
        max: usize,
    },
    /// A token between two separators (or at an end) is empty, as in
    /// `a..b` or `a.`; no key token could be told apart from it.
    #[error("token {index} of the pattern is empty (two '.' in a row, or one at an end)")]
    EmptyToken {
        /// The token's position, from 0.
        index: usize,
    },
    /// `>` appears before the last token.
    #[error("'>' may only be the last token (found at token {index})")]
    RestNotLast {
        /// The token's position, from 0.
        index: usize,
    },
}

/// A parsed subject pattern with at least one wildcard or none: matching
/// follows the tokens either way. Build one with [`Pattern::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    tokens: Box<[Token]>,
}

impl Pattern {
    /// Parses `text`: tokens separated by `.`, each non-empty; a token that
    /// is exactly `*` matches one key token and a last token that is
    /// exactly `>` matches the rest (one or more tokens). A `*` or `>`
    /// inside a longer token is an ordinary byte, as in NATS.
    pub fn parse(text: &[u8]) -> Result<Self, PatternError> {
        if text.is_empty() {
            return Err(PatternError::Empty);
        }
        if text.len() > PATTERN_BYTES_MAX {
            return Err(PatternError::TooLong {
                len: text.len(),
                max: PATTERN_BYTES_MAX,
            });
        }
        let count = text.iter().filter(|&&b| b == TOKEN_SEPARATOR).count() + 1;
        if count > PATTERN_TOKENS_MAX {
            return Err(PatternError::TooManyTokens {
                max: PATTERN_TOKENS_MAX,
            });
        }
        let mut parsed = Vec::with_capacity(count);
        for (index, token) in tokens(text).enumerate() {
            let token = match token {
                [] => return Err(PatternError::EmptyToken { index }),
                b"*" => Token::One,
                b">" if index + 1 == count => Token::Rest,
                b">" => return Err(PatternError::RestNotLast { index }),
                literal => Token::Literal(literal.into()),
            };
            parsed.push(token);
        }
        Ok(Self {
            tokens: parsed.into_boxed_slice(),
        })
    }

    /// The pattern's tokens, in order.
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// True if the pattern has a `*` or a `>`; one without is a literal
    /// subject written as a pattern.
    pub fn has_wildcard(&self) -> bool {
        self.tokens.iter().any(|t| !matches!(t, Token::Literal(_)))
    }

    /// True if `key` is one of the subjects the pattern names. Walks the
    /// key once and allocates nothing.
    pub fn matches(&self, key: &[u8]) -> bool {
        let mut key_tokens = tokens(key);
        for token in self.tokens.iter() {
            match token {
                // `>` needs at least one token left, and takes them all.
                Token::Rest => return key_tokens.next().is_some(),
                Token::One => {
                    if key_tokens.next().is_none() {
                        return false;
                    }
                }
                Token::Literal(literal) => match key_tokens.next() {
                    Some(t) if t == &literal[..] => {}
                    _ => return false,
                },
            }
        }
        key_tokens.next().is_none()
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, token) in self.tokens.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            match token {
                Token::One => f.write_str("*")?,
                Token::Rest => f.write_str(">")?,
                Token::Literal(bytes) => f.write_str(&String::from_utf8_lossy(bytes))?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Pattern {
        Pattern::parse(text.as_bytes()).expect("a valid pattern")
    }

    #[test]
    fn star_matches_exactly_one_token() {
        let pattern = p("orders.*.paid");
        assert!(pattern.matches(b"orders.eu.paid"));
        assert!(!pattern.matches(b"orders.paid"));
        assert!(!pattern.matches(b"orders.eu.west.paid"));
        assert!(!pattern.matches(b"orders.eu.paid.late"));
    }

    #[test]
    fn rest_matches_one_or_more_tokens_and_never_none() {
        let pattern = p("orders.>");
        assert!(pattern.matches(b"orders.eu"));
        assert!(pattern.matches(b"orders.eu.west.paid"));
        assert!(!pattern.matches(b"orders"));
        assert!(!pattern.matches(b"order.eu"));
        assert!(p(">").matches(b"anything.at.all"));
    }

    #[test]
    fn wildcards_inside_a_token_are_ordinary_bytes() {
        let pattern = p("a*.b>");
        assert!(!pattern.has_wildcard());
        assert!(pattern.matches(b"a*.b>"));
        assert!(!pattern.matches(b"ab.bc"));
    }

    #[test]
    fn empty_key_tokens_are_tokens() {
        // A key "a..b" has an empty middle token, which `*` matches.
        assert!(p("a.*.b").matches(b"a..b"));
        assert!(p("a.>").matches(b"a."));
    }

    #[test]
    fn malformed_patterns_are_refused_with_the_reason() {
        let err = |text: &[u8]| Pattern::parse(text).expect_err("refused");
        assert_eq!(err(b""), PatternError::Empty);
        assert_eq!(err(b"a..b"), PatternError::EmptyToken { index: 1 });
        assert_eq!(err(b".a"), PatternError::EmptyToken { index: 0 });
        assert_eq!(err(b"a."), PatternError::EmptyToken { index: 1 });
        assert_eq!(err(b"a.>.b"), PatternError::RestNotLast { index: 1 });
        let long = vec![b'x'; PATTERN_BYTES_MAX + 1];
        assert_eq!(
            err(&long),
            PatternError::TooLong {
                len: PATTERN_BYTES_MAX + 1,
                max: PATTERN_BYTES_MAX
            }
        );
        let many = vec!["t"; PATTERN_TOKENS_MAX + 1].join(".");
        assert_eq!(
            err(many.as_bytes()),
            PatternError::TooManyTokens {
                max: PATTERN_TOKENS_MAX
            }
        );
        assert!(Pattern::parse(vec!["t"; PATTERN_TOKENS_MAX].join(".").as_bytes()).is_ok());
    }

    #[test]
    fn display_writes_the_pattern_back() {
        for text in ["orders.*.paid", "a.>", ">", "plain"] {
            assert_eq!(p(text).to_string(), text);
        }
    }
}
