//! Publisher-side selection: a record names the attributes of the
//! subscribers it is for, a subscription declares the attributes it holds.

/// The header a record names its audience in: attributes separated by
/// commas (white space around each is ignored). A record without it, or
/// with an empty one, goes to every subscription its subject reaches.
pub const AUDIENCE_HEADER: &[u8] = b"herald.audience";
/// The most attributes a subscription may declare.
pub const ATTRIBUTES_MAX: usize = 32;
/// The most bytes one attribute may have.
pub const ATTRIBUTE_BYTES_MAX: usize = 64;

/// Why a subscription's attributes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributesError {
    /// More than [`ATTRIBUTES_MAX`].
    #[error("at most {ATTRIBUTES_MAX} attributes")]
    TooMany,
    /// Empty, longer than [`ATTRIBUTE_BYTES_MAX`], or holding a comma or
    /// white space at either end (it could never be named in an audience).
    #[error("attribute {0:?} is empty, longer than {ATTRIBUTE_BYTES_MAX} bytes, holds a comma, or starts or ends with white space")]
    Invalid(String),
}

/// The attributes a subscription holds, sorted for lookup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes(Box<[Box<[u8]>]>);

impl Attributes {
    /// Checks and keeps `attributes`.
    pub fn new<I, A>(attributes: I) -> Result<Self, AttributesError>
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        let mut held: Vec<Box<[u8]>> = Vec::new();
        for attribute in attributes {
            let attribute = attribute.as_ref();
            let invalid = attribute.is_empty()
                || attribute.len() > ATTRIBUTE_BYTES_MAX
                || attribute.contains(&b',')
                || attribute.first().is_some_and(u8::is_ascii_whitespace)
                || attribute.last().is_some_and(u8::is_ascii_whitespace);
            if invalid {
                return Err(AttributesError::Invalid(
                    String::from_utf8_lossy(attribute).into_owned(),
                ));
            }
            held.push(attribute.into());
            if held.len() > ATTRIBUTES_MAX {
                return Err(AttributesError::TooMany);
            }
        }
        held.sort_unstable();
        held.dedup();
        Ok(Self(held.into()))
    }

    /// True if a record whose audience header is `audience` (`None`: no
    /// such header or a null one) is for a subscription with these
    /// attributes. Allocates nothing.
    pub fn admits(&self, audience: Option<&[u8]>) -> bool {
        let Some(audience) = audience else {
            return true;
        };
        let mut named = audience
            .split(|&b| b == b',')
            .map(|a| a.trim_ascii())
            .filter(|a| !a.is_empty())
            .peekable();
        if named.peek().is_none() {
            return true;
        }
        named.any(|a| self.0.binary_search_by(|held| (**held).cmp(a)).is_ok())
    }

    /// The attributes, sorted, without repeats.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.0.iter().map(|a| &a[..])
    }

    /// True if it declares none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_with_an_audience_goes_to_holders_of_one_of_its_attributes() {
        let gold = Attributes::new(["tier-gold", "eu"]).expect("valid");
        let none = Attributes::default();
        assert!(gold.admits(Some(b"tier-gold")));
        assert!(gold.admits(Some(b"us, eu")));
        assert!(!gold.admits(Some(b"tier-silver,us")));
        assert!(!none.admits(Some(b"tier-gold")));
        // No audience, or an empty one: for everyone.
        assert!(gold.admits(None) && none.admits(None));
        assert!(none.admits(Some(b"")) && none.admits(Some(b" , ")));
    }

    #[test]
    fn attributes_that_no_audience_could_name_are_refused() {
        assert!(Attributes::new(["a,b"]).is_err());
        assert!(Attributes::new([""]).is_err());
        assert!(Attributes::new([" a"]).is_err());
        assert!(Attributes::new([vec![b'x'; ATTRIBUTE_BYTES_MAX + 1]]).is_err());
        let many: Vec<String> = (0..=ATTRIBUTES_MAX).map(|i| format!("a{i}")).collect();
        assert_eq!(Attributes::new(&many), Err(AttributesError::TooMany));
        let fine: Vec<String> = (0..ATTRIBUTES_MAX).map(|i| format!("a{i}")).collect();
        assert!(Attributes::new(&fine).is_ok());
    }
}
