//! Subjects and what a push subscription names.
//!
//! A subject is a (topic, record key); within a topic it is the key, opaque
//! bytes. A subscription names either one subject exactly
//! ([`Selector::Literal`]) or a [`Pattern`] over the key's tokens: the key
//! split on `.`, where `*` stands for exactly one token and a final `>` for
//! one or more tokens (the syntax of NATS subjects, so users and tools that
//! know it need nothing new).
//!
//! This crate is sans I/O and allocation-free on the matching path: a
//! pattern is parsed and checked once, at subscribe time, and matching a
//! record's key walks the key's bytes once. [`RoutingTable`] finds every
//! subscription a key goes to, without a lock on the delivery path.

mod filter;
mod literals;
#[cfg(all(test, herald_loom))]
mod loom_tests;
mod pattern;
mod prefetch;
mod selector;
mod subscribers;
mod table;

pub use pattern::{Pattern, PatternError, Token, PATTERN_BYTES_MAX, PATTERN_TOKENS_MAX};
pub use prefetch::{prefetch, prefetch_lines};
pub use selector::{Selector, SelectorError, SUBJECT_BYTES_MAX};
pub use table::{RoutingTable, TableReader, TableSize};

/// The byte that separates a key's tokens.
pub const TOKEN_SEPARATOR: u8 = b'.';

/// The tokens of `key`: its bytes split on [`TOKEN_SEPARATOR`]. A key with
/// no separator is one token; an empty key is one empty token.
pub fn tokens(key: &[u8]) -> impl Iterator<Item = &[u8]> + Clone {
    key.split(|&b| b == TOKEN_SEPARATOR)
}
