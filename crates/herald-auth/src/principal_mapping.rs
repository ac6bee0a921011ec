//! Kafka's `ssl.principal.mapping.rules`: how a client certificate's
//! subject (RFC 2253, `CN=alice,OU=eng,O=acme`) becomes a principal name.
//!
//! ```text
//! RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,DEFAULT
//! ```
//!
//! Rules are tried in order. A `RULE:pattern/replacement/` applies when
//! the pattern matches the whole subject; the name is the subject with the
//! pattern's matches replaced (Java's `$1` groups), then lower- (`L`) or
//! upper-cased (`U`). `DEFAULT` is the subject itself. A subject no rule
//! applies to has no principal: its client is refused.

use regex::Regex;

/// One rule.
#[derive(Debug, Clone)]
enum Rule {
    /// The subject unchanged.
    Default,
    /// A pattern and what its matches become.
    Replace {
        whole: Regex,
        pattern: Regex,
        replacement: String,
        case: Case,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// Why rules were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// Text that is neither `DEFAULT` nor `RULE:pattern/replacement/[LU]`.
    #[error("invalid principal mapping rule at {0:?}: expected DEFAULT or RULE:pattern/replacement/[LU]")]
    Syntax(String),
    /// A pattern the regex engine refuses.
    #[error("invalid pattern {0:?} in a principal mapping rule: {1}")]
    Pattern(String, String),
}

/// Parsed rules.
#[derive(Debug, Clone)]
pub struct PrincipalMapping {
    rules: Vec<Rule>,
}

impl Default for PrincipalMapping {
    /// `DEFAULT`: the subject itself.
    fn default() -> Self {
        Self {
            rules: vec![Rule::Default],
        }
    }
}

impl PrincipalMapping {
    /// Parses Kafka's rule list (rules separated by commas, which may also
    /// appear inside a rule's pattern).
    pub fn parse(text: &str) -> Result<Self, MappingError> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) =
                    until_slash(after).ok_or_else(|| MappingError::Syntax(rest.into()))?;
                let (replacement, after) =
                    until_slash(after).ok_or_else(|| MappingError::Syntax(rest.into()))?;
                let (case, after) = match after.as_bytes().first() {
                    Some(b'L') => (Case::Lower, &after[1..]),
                    Some(b'U') => (Case::Upper, &after[1..]),
                    _ => (Case::Keep, after),
                };
                let compile = |p: &str| {
                    Regex::new(p).map_err(|e| MappingError::Pattern(pattern.clone(), e.to_string()))
                };
                rules.push(Rule::Replace {
                    whole: compile(&format!("^(?:{pattern})$"))?,
                    pattern: compile(&pattern)?,
                    replacement: java_replacement(&replacement),
                    case,
                });
                rest = after;
            } else {
                return Err(MappingError::Syntax(rest.into()));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(after) => rest = after.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(MappingError::Syntax(rest.into())),
            }
        }
        if rules.is_empty() {
            return Ok(Self::default());
        }
        Ok(Self { rules })
    }

    /// The principal name of `subject`, from the first rule that applies.
    pub fn map(&self, subject: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(subject.to_owned()),
            Rule::Replace {
                whole,
                pattern,
                replacement,
                case,
            } => whole.is_match(subject).then(|| {
                let name = pattern
                    .replace_all(subject, replacement.as_str())
                    .into_owned();
                match case {
                    Case::Keep => name,
                    Case::Lower => name.to_lowercase(),
                    Case::Upper => name.to_uppercase(),
                }
            }),
        })
    }
}

/// Text up to the first `/` not escaped as `\/`, unescaped, and what
/// follows that slash.
fn until_slash(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if text[i + 1..].starts_with('/') => {
                out.push('/');
                chars.next();
            }
            '/' => return Some((out, &text[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

/// Java's replacement syntax (`$1`, `\$`) in the regex crate's (`${1}`,
/// `$$`): the regex crate reads `$1a` as a group named `1a`.
fn java_replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => out.push('\\'),
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples of Kafka's documentation for
    /// `ssl.principal.mapping.rules`.
    #[test]
    fn kafkas_documented_examples() {
        let rules = PrincipalMapping::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
             RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
             RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\
             DEFAULT",
        )
        .expect("parses");
        assert_eq!(
            rules
                .map("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .as_deref(),
            Some("serviceuser")
        );
        assert_eq!(
            rules
                .map("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .as_deref(),
            Some("adminuser@admin")
        );
        assert_eq!(
            rules.map("OU=x,CN=Alice.Smith,O=y").as_deref(),
            Some("alice.smith")
        );
        assert_eq!(rules.map("O=none").as_deref(), Some("O=none"), "DEFAULT");
    }

    #[test]
    fn no_rule_that_applies_is_no_principal() {
        let rules = PrincipalMapping::parse("RULE:^CN=(.*)$/$1/U").expect("parses");
        assert_eq!(rules.map("CN=bob").as_deref(), Some("BOB"));
        assert_eq!(rules.map("OU=x,CN=bob"), None);
        assert_eq!(
            PrincipalMapping::default().map("CN=x").as_deref(),
            Some("CN=x")
        );
    }

    #[test]
    fn escapes_and_bad_rules() {
        let rules = PrincipalMapping::parse(r"RULE:^CN=([a-z]+)\/x$/$1a\$/").expect("parses");
        assert_eq!(rules.map("CN=bob/x").as_deref(), Some("boba$"));
        for bad in ["RULE:^CN=(.*)$/$1", "RULE:(/x/", "NOPE", "DEFAULT DEFAULT"] {
            assert!(PrincipalMapping::parse(bad).is_err(), "{bad}");
        }
    }
}
