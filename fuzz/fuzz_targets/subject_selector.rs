//! A subscriber's selector text, then a record key: parsing never panics,
//! a parsed pattern written back parses to itself, and matching a key
//! agrees with a literal comparison when the selector is literal.
#![no_main]

use herald_subjects::{Pattern, Selector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte says where the selector ends and the key begins.
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (text, key) = rest.split_at((split as usize).min(rest.len()));
    match Selector::parse(text) {
        Ok(Selector::Literal(subject)) => {
            assert_eq!(Selector::Literal(subject.clone()).matches(key), &subject[..] == key);
        }
        Ok(Selector::Pattern(pattern)) => {
            let _ = pattern.matches(key);
            if let Ok(text) = std::str::from_utf8(text) {
                let again = Pattern::parse(pattern.to_string().as_bytes()).expect("reparses");
                assert_eq!(again, pattern, "{text}");
            }
        }
        Err(_) => {}
    }
});
