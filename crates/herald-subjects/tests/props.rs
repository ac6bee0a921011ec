//! The matcher against a reference written the obvious way (recursion over
//! vectors of tokens), on keys and patterns drawn from a small alphabet so
//! that matches are common.

use herald_subjects::{Pattern, Selector, Token};
use proptest::prelude::*;

/// The reference: does the token list `pattern` match the token list `key`?
fn reference(pattern: &[Token], key: &[Vec<u8>]) -> bool {
    match (pattern.first(), key.first()) {
        (None, None) => true,
        (Some(Token::Rest), Some(_)) => true,
        (Some(Token::One), Some(_)) => reference(&pattern[1..], &key[1..]),
        (Some(Token::Literal(l)), Some(k)) => l[..] == k[..] && reference(&pattern[1..], &key[1..]),
        _ => false,
    }
}

fn key_token() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![b'a', b'b', b'*', b'>']), 0..3)
}

fn pattern_token() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["a", "b", "ab", "*", "*", "a*"]).prop_map(str::to_owned)
}

proptest! {
    #[test]
    fn matching_agrees_with_the_reference(
        key in prop::collection::vec(key_token(), 1..6),
        body in prop::collection::vec(pattern_token(), 0..5),
        rest in any::<bool>(),
    ) {
        let mut text = body.join(".");
        if rest {
            if !text.is_empty() { text.push('.'); }
            text.push('>');
        }
        prop_assume!(!text.is_empty());
        let pattern = Pattern::parse(text.as_bytes()).expect("built from valid tokens");
        let joined = key.join(&b'.');
        prop_assert_eq!(pattern.matches(&joined), reference(pattern.tokens(), &key));
        // Writing the pattern back and parsing it again gives the same pattern.
        prop_assert_eq!(&Pattern::parse(pattern.to_string().as_bytes()).expect("reparses"), &pattern);
    }

    #[test]
    fn parsing_never_panics_and_a_literal_matches_only_itself(
        text in prop::collection::vec(prop::sample::select(vec![b'a', b'.', b'*', b'>', 0xff]), 0..12),
        other in prop::collection::vec(prop::sample::select(vec![b'a', b'.']), 0..6),
    ) {
        if let Ok(Selector::Literal(subject)) = Selector::parse(&text) {
            prop_assert!(Selector::Literal(subject.clone()).matches(&text));
            prop_assert_eq!(Selector::Literal(subject).matches(&other), other == text);
        }
    }
}
