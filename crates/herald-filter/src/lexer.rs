//! The filter text as tokens.

use crate::parser::FilterError;

/// One token and the byte offset it starts at.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spanned {
    pub(crate) token: Token,
    pub(crate) at: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token {
    /// A word: a keyword, `key`, or `header.NAME` whole.
    Word(String),
    /// A string literal's bytes, escapes resolved.
    Str(Vec<u8>),
    /// A number literal.
    Number(f64),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// The most bytes one string literal may have.
pub(crate) const STRING_BYTES_MAX: usize = 1024;

/// Splits `text` into tokens.
pub(crate) fn tokens(text: &str) -> Result<Vec<Spanned>, FilterError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let at = i;
        let b = bytes[i];
        let token = match b {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'(' => single(&mut i, Token::LParen),
            b')' => single(&mut i, Token::RParen),
            b'[' => single(&mut i, Token::LBracket),
            b']' => single(&mut i, Token::RBracket),
            b',' => single(&mut i, Token::Comma),
            b'=' if bytes.get(i + 1) == Some(&b'=') => double(&mut i, Token::Eq),
            b'!' if bytes.get(i + 1) == Some(&b'=') => double(&mut i, Token::Ne),
            b'<' if bytes.get(i + 1) == Some(&b'=') => double(&mut i, Token::Le),
            b'>' if bytes.get(i + 1) == Some(&b'=') => double(&mut i, Token::Ge),
            b'<' => single(&mut i, Token::Lt),
            b'>' => single(&mut i, Token::Gt),
            b'"' => Token::Str(string(bytes, &mut i)?),
            b'-' | b'0'..=b'9' => Token::Number(number(text, &mut i)?),
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let end = bytes[i..]
                    .iter()
                    .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-')))
                    .map_or(bytes.len(), |n| i + n);
                let word = text[i..end].to_owned();
                i = end;
                Token::Word(word)
            }
            _ => {
                return Err(FilterError::Syntax {
                    at,
                    message: format!(
                        "unexpected character {:?}",
                        text[at..].chars().next().unwrap_or('?')
                    ),
                })
            }
        };
        out.push(Spanned { token, at });
    }
    Ok(out)
}

fn single(i: &mut usize, token: Token) -> Token {
    *i += 1;
    token
}

fn double(i: &mut usize, token: Token) -> Token {
    *i += 2;
    token
}

/// A string literal from its opening quote; `\"`, `\\`, `\n`, `\t`, `\r`
/// and `\xHH` escapes.
fn string(bytes: &[u8], i: &mut usize) -> Result<Vec<u8>, FilterError> {
    let start = *i;
    *i += 1;
    let mut out = Vec::new();
    loop {
        let Some(&b) = bytes.get(*i) else {
            return Err(FilterError::Syntax {
                at: start,
                message: "unterminated string".into(),
            });
        };
        *i += 1;
        match b {
            b'"' => break,
            b'\\' => {
                let escaped = bytes.get(*i).copied();
                *i += 1;
                out.push(match escaped {
                    Some(b'"') => b'"',
                    Some(b'\\') => b'\\',
                    Some(b'n') => b'\n',
                    Some(b't') => b'\t',
                    Some(b'r') => b'\r',
                    Some(b'x') => {
                        let hex = bytes
                            .get(*i..*i + 2)
                            .and_then(|h| std::str::from_utf8(h).ok())
                            .and_then(|h| u8::from_str_radix(h, 16).ok())
                            .ok_or(FilterError::Syntax {
                                at: *i - 2,
                                message: "\\x needs two hex digits".into(),
                            })?;
                        *i += 2;
                        hex
                    }
                    _ => {
                        return Err(FilterError::Syntax {
                            at: *i - 2,
                            message: "unknown escape (use \\\" \\\\ \\n \\t \\r or \\xHH)".into(),
                        })
                    }
                });
            }
            b => out.push(b),
        }
        if out.len() > STRING_BYTES_MAX {
            return Err(FilterError::TooLarge {
                what: "string literal",
                limit: STRING_BYTES_MAX,
            });
        }
    }
    Ok(out)
}

/// A decimal number: an optional `-`, digits, an optional fraction and
/// exponent.
fn number(text: &str, i: &mut usize) -> Result<f64, FilterError> {
    let bytes = text.as_bytes();
    let start = *i;
    let mut end = start;
    if bytes.get(end) == Some(&b'-') {
        end += 1;
    }
    while end < bytes.len()
        && (bytes[end].is_ascii_digit()
            || bytes[end] == b'.'
            || matches!(bytes[end], b'e' | b'E')
            || (matches!(bytes[end], b'+' | b'-') && matches!(bytes[end - 1], b'e' | b'E')))
    {
        end += 1;
    }
    *i = end;
    let literal = &text[start..end];
    match literal.parse::<f64>() {
        Ok(value) if value.is_finite() && literal.bytes().any(|b| b.is_ascii_digit()) => Ok(value),
        _ => Err(FilterError::Syntax {
            at: start,
            message: format!("{literal:?} is not a number"),
        }),
    }
}
