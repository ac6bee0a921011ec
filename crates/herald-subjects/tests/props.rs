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

#[derive(Debug, Clone)]
enum Op {
    Insert(String, u8),
    Remove(String, u8),
}

fn selector_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "*"]), 1..4).prop_flat_map(|body| {
        any::<bool>().prop_map(move |rest| {
            let mut text = body.join(".");
            if rest {
                text.push_str(".>");
            }
            text
        })
    })
}

fn op() -> impl Strategy<Value = Op> {
    (selector_text(), 0u8..4, any::<bool>()).prop_map(|(text, sub, insert)| {
        if insert {
            Op::Insert(text, sub)
        } else {
            Op::Remove(text, sub)
        }
    })
}

proptest! {
    /// After any sequence of subscribes and unsubscribes, every key goes to
    /// exactly the subscribers whose selectors match it (checked against a
    /// list of routes and each selector's own matcher), once per route.
    #[test]
    fn the_table_routes_exactly_what_its_routes_match(
        ops in prop::collection::vec(op(), 0..40),
        keys in prop::collection::vec(prop::collection::vec(prop::sample::select(vec!["a", "b", "c"]), 1..5), 1..12),
    ) {
        let table = herald_subjects::RoutingTable::new();
        let mut routes: Vec<(Selector, u8)> = Vec::new();
        for op in ops {
            match op {
                Op::Insert(text, sub) => {
                    let selector = Selector::parse(text.as_bytes()).expect("valid");
                    let fresh = !routes.contains(&(selector.clone(), sub));
                    prop_assert_eq!(table.insert(&selector, sub), fresh);
                    if fresh {
                        routes.push((selector, sub));
                    }
                }
                Op::Remove(text, sub) => {
                    let selector = Selector::parse(text.as_bytes()).expect("valid");
                    let at = routes.iter().position(|r| r == &(selector.clone(), sub));
                    prop_assert_eq!(table.remove(&selector, &sub), at.is_some());
                    if let Some(at) = at {
                        routes.remove(at);
                    }
                }
            }
        }
        for key in keys {
            let key = key.join(".");
            let mut got = Vec::new();
            table.for_each_match(key.as_bytes(), |&s| got.push(s));
            got.sort_unstable();
            let mut want: Vec<u8> = routes
                .iter()
                .filter(|(selector, _)| selector.matches(key.as_bytes()))
                .map(|&(_, sub)| sub)
                .collect();
            want.sort_unstable();
            prop_assert_eq!(got, want, "key {}", key);
        }
        let size = table.size();
        prop_assert_eq!(size.literal_routes + size.pattern_routes, routes.len());
    }
}
