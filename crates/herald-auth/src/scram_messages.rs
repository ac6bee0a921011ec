//! The SCRAM messages a client sends (RFC 5802 section 7), parsed from
//! untrusted bytes: every malformed message is an error, never a panic.
//! The server's own messages are written where they are made.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

/// Why a client's SCRAM message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// Not UTF-8.
    #[error("a SCRAM message must be UTF-8")]
    NotUtf8,
    /// The GS2 header is not `n,,` or `n,a=NAME,` (herald binds no channel).
    #[error("unsupported GS2 header (channel binding is not supported): {0}")]
    Gs2Header(String),
    /// An attribute is missing or out of place.
    #[error("expected the attribute `{0}=`")]
    Missing(&'static str),
    /// A mandatory extension (`m=`) that herald does not know.
    #[error("unsupported mandatory extension")]
    MandatoryExtension,
    /// A name with an `=` that is not `=2C` or `=3D`, or empty.
    #[error("malformed user name")]
    Name,
    /// A nonce with a character outside printable ASCII or a comma.
    #[error("malformed nonce")]
    Nonce,
    /// Base64 that does not decode.
    #[error("malformed base64 in `{0}=`")]
    Base64(&'static str),
}

/// The client's first message: `gs2-header client-first-bare`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The GS2 header as sent (`n,,` or `n,a=...,`): the final message's
    /// channel binding must repeat it.
    pub gs2_header: String,
    /// The authorization id of the header, if any.
    pub authzid: Option<String>,
    /// The message after the header, which the signatures cover.
    pub bare: String,
    /// The user name, unescaped.
    pub user: String,
    /// The client's nonce.
    pub nonce: String,
    /// Extensions after the nonce, as `key=value` (Kafka's `tokenauth=true`
    /// among them).
    pub extensions: Vec<(String, String)>,
}

/// The client's final message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    /// The message up to (not including) `,p=`, which the signatures cover.
    pub without_proof: String,
    /// The decoded channel binding (the GS2 header, for herald).
    pub channel_binding: Vec<u8>,
    /// The nonce: the client's and the server's, joined.
    pub nonce: String,
    /// The decoded proof.
    pub proof: Vec<u8>,
}

/// Parses a client-first message.
pub fn parse_client_first(message: &[u8]) -> Result<ClientFirst, MessageError> {
    let text = std::str::from_utf8(message).map_err(|_| MessageError::NotUtf8)?;
    // gs2-header = gs2-cbind-flag "," [ authzid ] ","
    let (flag, rest) = text
        .split_once(',')
        .ok_or_else(|| MessageError::Gs2Header(text.into()))?;
    if flag != "n" {
        // `y` (client could bind, thinks the server cannot) is harmless,
        // but herald is no channel-binding server either way: accept only
        // what clients without binding send.
        return Err(MessageError::Gs2Header(flag.into()));
    }
    let (authz, bare) = rest
        .split_once(',')
        .ok_or_else(|| MessageError::Gs2Header(text.into()))?;
    let authzid = match authz {
        "" => None,
        a => Some(unescape_name(
            a.strip_prefix("a=")
                .ok_or_else(|| MessageError::Gs2Header(a.into()))?,
        )?),
    };
    let gs2_header = text[..text.len() - bare.len()].to_owned();
    let mut attributes = bare.split(',');
    let mut next = attributes.next();
    if next.is_some_and(|a| a.starts_with("m=")) {
        return Err(MessageError::MandatoryExtension);
    }
    let user = next
        .and_then(|a| a.strip_prefix("n="))
        .ok_or(MessageError::Missing("n"))?;
    let user = unescape_name(user)?;
    next = attributes.next();
    let nonce = next
        .and_then(|a| a.strip_prefix("r="))
        .ok_or(MessageError::Missing("r"))?;
    check_nonce(nonce)?;
    let extensions = attributes
        .map(|a| {
            a.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or(MessageError::Missing("extension"))
        })
        .collect::<Result<_, _>>()?;
    Ok(ClientFirst {
        gs2_header,
        authzid,
        bare: bare.to_owned(),
        user,
        nonce: nonce.to_owned(),
        extensions,
    })
}

/// Parses a client-final message.
pub fn parse_client_final(message: &[u8]) -> Result<ClientFinal, MessageError> {
    let text = std::str::from_utf8(message).map_err(|_| MessageError::NotUtf8)?;
    let (without_proof, proof) = text.rsplit_once(",p=").ok_or(MessageError::Missing("p"))?;
    let mut attributes = without_proof.split(',');
    let binding = attributes
        .next()
        .and_then(|a| a.strip_prefix("c="))
        .ok_or(MessageError::Missing("c"))?;
    let nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or(MessageError::Missing("r"))?;
    check_nonce(nonce)?;
    Ok(ClientFinal {
        without_proof: without_proof.to_owned(),
        channel_binding: BASE64
            .decode(binding)
            .map_err(|_| MessageError::Base64("c"))?,
        nonce: nonce.to_owned(),
        proof: BASE64
            .decode(proof)
            .map_err(|_| MessageError::Base64("p"))?,
    })
}

/// A saslname with `=2C` and `=3D` turned back into `,` and `=`.
fn unescape_name(name: &str) -> Result<String, MessageError> {
    if name.is_empty() {
        return Err(MessageError::Name);
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(MessageError::Name),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A saslname as a client writes it: `,` and `=` escaped.
pub fn escape_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

fn check_nonce(nonce: &str) -> Result<(), MessageError> {
    // printable = %x21-2B / %x2D-7E: printable ASCII but the comma.
    let printable = |c: char| matches!(c, '\x21'..='\x2b' | '\x2d'..='\x7e');
    if nonce.is_empty() || !nonce.chars().all(printable) {
        return Err(MessageError::Nonce);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_plain_client_first_message_parses() {
        let first = parse_client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO").expect("parses");
        assert_eq!(first.gs2_header, "n,,");
        assert_eq!(first.authzid, None);
        assert_eq!(first.bare, "n=user,r=rOprNGfwEbeRWgbNEkqO");
        assert_eq!(first.user, "user");
        assert_eq!(first.nonce, "rOprNGfwEbeRWgbNEkqO");
        assert!(first.extensions.is_empty());
    }

    #[test]
    fn names_are_unescaped_and_extensions_kept() {
        let first =
            parse_client_first(b"n,a=a=2Cb,n=a=2Cb=3Dc,r=abc,tokenauth=true").expect("parses");
        assert_eq!(first.gs2_header, "n,a=a=2Cb,");
        assert_eq!(first.authzid.as_deref(), Some("a,b"));
        assert_eq!(first.user, "a,b=c");
        assert_eq!(
            first.extensions,
            [("tokenauth".to_owned(), "true".to_owned())]
        );
        assert_eq!(escape_name("a,b=c"), "a=2Cb=3Dc");
    }

    #[test]
    fn malformed_client_first_messages_are_refused() {
        for bad in [
            &b""[..],
            b"p=tls-unique,,n=user,r=abc",
            b"y,,n=user,r=abc",
            b"n,,r=abc",
            b"n,,n=,r=abc",
            b"n,,n=us=er,r=abc",
            b"n,,n=user",
            b"n,,n=user,r=a,b",
            b"n,,m=ext,n=user,r=abc",
            b"n,,n=user,r=ab\x01c",
            b"n,x,n=user,r=abc",
            b"\xff,,n=user,r=abc",
        ] {
            assert!(
                parse_client_first(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_client_final_message_parses() {
        let last = parse_client_final(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        )
        .expect("parses");
        assert_eq!(
            last.without_proof,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
        );
        assert_eq!(last.channel_binding, b"n,,");
        assert_eq!(last.proof.len(), 32);
        for bad in [
            &b"c=biws,r=abc"[..],
            b"r=abc,p=AAAA",
            b"c=biws,p=AAAA",
            b"c=bi!ws,r=abc,p=AAAA",
            b"c=biws,r=abc,p=A",
        ] {
            assert!(
                parse_client_final(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    proptest! {
        #[test]
        fn no_input_makes_the_parsers_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
            let _ = parse_client_first(&bytes);
            let _ = parse_client_final(&bytes);
        }

        #[test]
        fn any_name_survives_escaping(name in "[a-z,=:@.]{1,24}") {
            let message = format!("n,,n={},r=nonce", escape_name(&name));
            let first = parse_client_first(message.as_bytes()).expect("parses");
            prop_assert_eq!(first.user, name);
        }
    }
}
