//! The subject of a client's certificate in RFC 2253 form, as Kafka's
//! `X500Principal.getName()` gives it to the principal mapping rules:
//! the most specific name first (`CN=alice,OU=eng,O=acme,C=US`).

use rustls_pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The subject of the first (leaf) certificate of a client's chain, if it
/// parses.
pub fn client_subject(chain: &[CertificateDer<'_>]) -> Option<String> {
    let (_, certificate) = X509Certificate::from_der(chain.first()?.as_ref()).ok()?;
    let rdns: Vec<String> = certificate
        .subject()
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|attribute| {
                    let oid = attribute.attr_type();
                    let name =
                        x509_parser::objects::oid2abbrev(oid, x509_parser::objects::oid_registry())
                            .map(str::to_owned)
                            .unwrap_or_else(|_| oid.to_id_string());
                    let value = attribute
                        .as_str()
                        .map(escape)
                        .unwrap_or_else(|_| format!("#{}", hex(attribute.as_slice())));
                    format!("{name}={value}")
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    // The certificate lists the least specific name first; RFC 2253
    // writes them the other way round.
    Some(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// A value with RFC 2253's special characters escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=')
            || (i == 0 && (c == ' ' || c == '#'))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_characters_are_escaped() {
        assert_eq!(escape("Smith, John"), "Smith\\, John");
        assert_eq!(escape("#1 "), "\\#1\\ ");
        assert_eq!(escape("a=b+c"), "a\\=b\\+c");
    }
}
