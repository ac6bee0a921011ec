//! The filter language: its grammar, its limits, and the compiled form.
//!
//! ```text
//! filter := or
//! or     := and ("or" and)*
//! and    := unary ("and" unary)*
//! unary  := "not" unary | "(" or ")" | test
//! test   := "exists" field
//!         | field ("==" | "!=") value
//!         | field ("<" | "<=" | ">" | ">=") number
//!         | field "in" "(" value ("," value)* ")"
//!         | field "starts_with" string
//! field  := "key" | "header." NAME | "header" "[" string "]"
//!         | "timestamp" | "value"
//!         | "value." NAME ("." NAME)* | "value" ("[" string "]")+
//! value  := string | number
//! ```
//!
//! Keywords are lower or upper case. `NAME` is letters, digits, `_`, `.`
//! and `-`; other header names use the bracket form. Strings are
//! double-quoted with `\"`, `\\`, `\n`, `\t`, `\r` and `\xHH` escapes and
//! compare as bytes; a number compares with a field whose bytes are a
//! decimal number (`"100"`, `"1e2"` and `"100.0"` all equal `100`). A
//! missing header or null key satisfies no test but `!=` (which is
//! `not ==`); `exists` is true for a header with a null value.
//!
//! `timestamp` is the record's timestamp in milliseconds (a number).
//! `value` is the whole value's bytes; `value.a.b` (or `value["a"]["b"]`)
//! reads the value as a JSON object and takes field `b` of its field `a`:
//! a string compares as its text, a number as a number, `true` and
//! `false` as those words; `null`, an object or an array is present
//! (`exists` holds) but satisfies no comparison; a value that is not JSON,
//! or lacks the path, has no such field. At most 16 steps per path.

use std::fmt;

/// The fields a test may name, for error messages.
const FIELDS_EXPECTED: &str =
    "`key`, `header.NAME`, `header[\"NAME\"]`, `timestamp`, `value`, `value.FIELD` or `value[\"FIELD\"]`";

use crate::header_name::HeaderName;
use crate::json_path::JsonPath;
use crate::lexer::{self, Spanned, Token};
use crate::{FILTER_BYTES_MAX, FILTER_DEPTH_MAX, FILTER_IN_VALUES_MAX, FILTER_TESTS_MAX};

/// Why a filter's text was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FilterError {
    /// Nothing but white space.
    #[error("the filter is empty")]
    Empty,
    /// Not in the grammar.
    #[error("filter syntax error at byte {at}: {message}")]
    Syntax {
        /// Byte offset in the text.
        at: usize,
        /// What was wrong there.
        message: String,
    },
    /// Past one of the limits.
    #[error("the filter's {what} is over the limit of {limit}")]
    TooLarge {
        /// Which limit.
        what: &'static str,
        /// Its value.
        limit: usize,
    },
}

/// A compiled filter: what a subscription's records must satisfy.
#[derive(Debug, Clone, PartialEq)]
pub struct Filter {
    pub(crate) root: Node,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    All(Box<[Node]>),
    Any(Box<[Node]>),
    Not(Box<Node>),
    Test(Field, Predicate),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Field {
    Key,
    Header(HeaderName),
    Timestamp,
    Value,
    /// A path of object keys into the value read as JSON.
    Json(JsonPath),
}

/// The most steps a JSON path may take.
pub(crate) const JSON_PATH_MAX: usize = 16;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Predicate {
    Exists,
    Eq(Value),
    Ne(Value),
    Compare(Comparison, f64),
    In(Box<[Value]>),
    StartsWith(Box<[u8]>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Comparison {
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Bytes(Box<[u8]>),
    Number(f64),
}

impl Filter {
    /// Parses and checks `text` against the grammar and the limits
    /// ([`FILTER_BYTES_MAX`], [`FILTER_TESTS_MAX`], [`FILTER_DEPTH_MAX`],
    /// [`FILTER_IN_VALUES_MAX`], 1 KiB per string).
    pub fn parse(text: &str) -> Result<Self, FilterError> {
        let tokens = tokens_within_limits(text)?;
        let mut parser = Parser::new(&tokens, text);
        let root = parser.or(0)?;
        if let Some(extra) = parser.peek() {
            return Err(FilterError::Syntax {
                at: extra.at,
                message: "expected `and`, `or` or the end".into(),
            });
        }
        Ok(Self { root })
    }
}

/// One field of a record as a filter names it (`key`, `header.NAME`,
/// `header["NAME"]`, `timestamp`, `value`, `value.a.b`, `value["a"]`):
/// what an aggregate reads.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldRef(pub(crate) Field);

impl FieldRef {
    /// A number naming this field in every query of the process (`key`,
    /// `value`, `timestamp`, and each JSON path with an id), so something
    /// computed from one record's field for one query can be kept for
    /// the others; `None` for headers and for paths past the id table.
    pub fn shared_id(&self) -> Option<u64> {
        match &self.0 {
            Field::Key => Some(0),
            Field::Value => Some(1),
            Field::Timestamp => Some(2),
            Field::Json(path) => path.id.map(|id| 3 + u64::from(id)),
            Field::Header(_) => None,
        }
    }

    /// Parses a field's name as a filter's test would.
    pub fn parse(text: &str) -> Result<Self, FilterError> {
        let tokens = tokens_within_limits(text)?;
        let mut parser = Parser::new(&tokens, text);
        let field = parser.field()?;
        if let Some(extra) = parser.peek() {
            return Err(FilterError::Syntax {
                at: extra.at,
                message: "expected the end of the field's name".into(),
            });
        }
        Ok(Self(field))
    }
}

impl fmt::Display for FieldRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The tokens of `text`, refused if it is too long or empty.
fn tokens_within_limits(text: &str) -> Result<Vec<Spanned>, FilterError> {
    if text.len() > FILTER_BYTES_MAX {
        return Err(FilterError::TooLarge {
            what: "text in bytes",
            limit: FILTER_BYTES_MAX,
        });
    }
    let tokens = lexer::tokens(text)?;
    if tokens.is_empty() {
        return Err(FilterError::Empty);
    }
    Ok(tokens)
}

struct Parser<'t> {
    tokens: &'t [Spanned],
    next: usize,
    tests: usize,
    end: usize,
}

impl<'t> Parser<'t> {
    fn new(tokens: &'t [Spanned], text: &str) -> Self {
        Self {
            tokens,
            next: 0,
            tests: 0,
            end: text.len(),
        }
    }

    fn peek(&self) -> Option<&Spanned> {
        self.tokens.get(self.next)
    }

    fn at(&self) -> usize {
        self.peek().map_or(self.end, |t| t.at)
    }

    fn error<T>(&self, message: impl Into<String>) -> Result<T, FilterError> {
        Err(FilterError::Syntax {
            at: self.at(),
            message: message.into(),
        })
    }

    fn keyword(&mut self, word: &str) -> bool {
        match self.peek() {
            Some(Spanned {
                token: Token::Word(w),
                ..
            }) if w == word
                || w.eq_ignore_ascii_case(word) && w.bytes().all(|b| !b.is_ascii_lowercase()) =>
            {
                self.next += 1;
                true
            }
            _ => false,
        }
    }

    fn token(&mut self, token: &Token) -> bool {
        if self.peek().is_some_and(|t| &t.token == token) {
            self.next += 1;
            true
        } else {
            false
        }
    }

    fn deeper(depth: usize) -> Result<usize, FilterError> {
        if depth >= FILTER_DEPTH_MAX {
            return Err(FilterError::TooLarge {
                what: "nesting depth",
                limit: FILTER_DEPTH_MAX,
            });
        }
        Ok(depth + 1)
    }

    fn or(&mut self, depth: usize) -> Result<Node, FilterError> {
        let depth = Self::deeper(depth)?;
        let mut any = vec![self.and(depth)?];
        while self.keyword("or") {
            any.push(self.and(depth)?);
        }
        Ok(if any.len() == 1 {
            any.remove(0)
        } else {
            Node::Any(any.into())
        })
    }

    fn and(&mut self, depth: usize) -> Result<Node, FilterError> {
        let mut all = vec![self.unary(depth)?];
        while self.keyword("and") {
            all.push(self.unary(depth)?);
        }
        Ok(if all.len() == 1 {
            all.remove(0)
        } else {
            Node::All(all.into())
        })
    }

    fn unary(&mut self, depth: usize) -> Result<Node, FilterError> {
        if self.keyword("not") {
            let depth = Self::deeper(depth)?;
            return Ok(Node::Not(Box::new(self.unary(depth)?)));
        }
        if self.token(&Token::LParen) {
            let inner = self.or(depth)?;
            if !self.token(&Token::RParen) {
                return self.error("expected `)`");
            }
            return Ok(inner);
        }
        self.test()
    }

    fn test(&mut self) -> Result<Node, FilterError> {
        self.tests += 1;
        if self.tests > FILTER_TESTS_MAX {
            return Err(FilterError::TooLarge {
                what: "number of tests",
                limit: FILTER_TESTS_MAX,
            });
        }
        if self.keyword("exists") {
            return Ok(Node::Test(self.field()?, Predicate::Exists));
        }
        let field = self.field()?;
        let predicate = if self.token(&Token::Eq) {
            Predicate::Eq(self.value()?)
        } else if self.token(&Token::Ne) {
            Predicate::Ne(self.value()?)
        } else if let Some(comparison) = self.comparison() {
            match self.value()? {
                Value::Number(n) => Predicate::Compare(comparison, n),
                Value::Bytes(_) => {
                    self.next -= 1;
                    return self.error("`<`, `<=`, `>` and `>=` compare with a number");
                }
            }
        } else if self.keyword("in") {
            if !self.token(&Token::LParen) {
                return self.error("expected `(` after `in`");
            }
            let mut values = vec![self.value()?];
            while self.token(&Token::Comma) {
                values.push(self.value()?);
                if values.len() > FILTER_IN_VALUES_MAX {
                    return Err(FilterError::TooLarge {
                        what: "values of an `in` list",
                        limit: FILTER_IN_VALUES_MAX,
                    });
                }
            }
            if !self.token(&Token::RParen) {
                return self.error("expected `,` or `)` in the `in` list");
            }
            Predicate::In(values.into())
        } else if self.keyword("starts_with") {
            match self.value()? {
                Value::Bytes(prefix) => Predicate::StartsWith(prefix),
                Value::Number(_) => {
                    self.next -= 1;
                    return self.error("`starts_with` takes a string");
                }
            }
        } else {
            return self.error("expected `==`, `!=`, `<`, `<=`, `>`, `>=`, `in` or `starts_with`");
        };
        Ok(Node::Test(field, predicate))
    }

    fn comparison(&mut self) -> Option<Comparison> {
        let comparison = match self.peek()?.token {
            Token::Lt => Comparison::Lt,
            Token::Le => Comparison::Le,
            Token::Gt => Comparison::Gt,
            Token::Ge => Comparison::Ge,
            _ => return None,
        };
        self.next += 1;
        Some(comparison)
    }

    fn field(&mut self) -> Result<Field, FilterError> {
        let Some(Spanned {
            token: Token::Word(word),
            ..
        }) = self.peek()
        else {
            return self.error(FIELDS_EXPECTED);
        };
        let field = if word == "key" {
            Field::Key
        } else if word == "timestamp" {
            Field::Timestamp
        } else if let Some(name) = word.strip_prefix("header.") {
            if name.is_empty() {
                return self.error("a header name after `header.`");
            }
            Field::Header(HeaderName::new(name.as_bytes().into()))
        } else if word == "header" {
            self.next += 1;
            let Some(name) = self.bracketed()? else {
                return self.error("expected `.NAME` or `[\"NAME\"]` after `header`");
            };
            return Ok(Field::Header(HeaderName::new(name)));
        } else if let Some(path) = word.strip_prefix("value.") {
            let steps: Vec<Box<[u8]>> = path.split('.').map(|s| s.as_bytes().into()).collect();
            if steps.iter().any(|s| s.is_empty()) {
                return self.error("a field name after each `.` of `value.`");
            }
            if steps.len() > JSON_PATH_MAX {
                return Err(FilterError::TooLarge {
                    what: "JSON path in steps",
                    limit: JSON_PATH_MAX,
                });
            }
            Field::Json(JsonPath::new(steps.into()))
        } else if word == "value" {
            self.next += 1;
            let mut steps = Vec::new();
            while let Some(step) = self.bracketed()? {
                if steps.len() == JSON_PATH_MAX {
                    return Err(FilterError::TooLarge {
                        what: "JSON path in steps",
                        limit: JSON_PATH_MAX,
                    });
                }
                steps.push(step);
            }
            return Ok(if steps.is_empty() {
                Field::Value
            } else {
                Field::Json(JsonPath::new(steps.into()))
            });
        } else {
            return self.error(format!("unknown field {word:?} ({FIELDS_EXPECTED})"));
        };
        self.next += 1;
        Ok(field)
    }

    /// `[ string ]` if the next token opens one.
    fn bracketed(&mut self) -> Result<Option<Box<[u8]>>, FilterError> {
        if !self.token(&Token::LBracket) {
            return Ok(None);
        }
        let Some(Spanned {
            token: Token::Str(name),
            ..
        }) = self.peek()
        else {
            return self.error("expected a string naming the field");
        };
        let name = name.clone().into_boxed_slice();
        self.next += 1;
        if !self.token(&Token::RBracket) {
            return self.error("expected `]`");
        }
        Ok(Some(name))
    }

    fn value(&mut self) -> Result<Value, FilterError> {
        let value = match self.peek().map(|t| &t.token) {
            Some(Token::Str(bytes)) => Value::Bytes(bytes.clone().into_boxed_slice()),
            Some(Token::Number(n)) => Value::Number(*n),
            _ => return self.error("expected a string or a number"),
        };
        self.next += 1;
        Ok(value)
    }
}

/// The filter in canonical form, every `and` and `or` group in
/// parentheses: it parses back to an equal filter.
impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.root)
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let joined = |f: &mut fmt::Formatter<'_>, nodes: &[Node], op: &str| {
            write!(f, "(")?;
            for (i, node) in nodes.iter().enumerate() {
                if i > 0 {
                    write!(f, " {op} ")?;
                }
                write!(f, "{node}")?;
            }
            write!(f, ")")
        };
        match self {
            Node::All(nodes) => joined(f, nodes, "and"),
            Node::Any(nodes) => joined(f, nodes, "or"),
            // `not` binds tighter than `and` and `or`, and groups print
            // in parentheses: no more are needed.
            Node::Not(node) => write!(f, "not {node}"),
            Node::Test(field, Predicate::Exists) => write!(f, "exists {field}"),
            Node::Test(field, Predicate::Eq(v)) => write!(f, "{field} == {v}"),
            Node::Test(field, Predicate::Ne(v)) => write!(f, "{field} != {v}"),
            Node::Test(field, Predicate::Compare(c, n)) => {
                let op = match c {
                    Comparison::Lt => "<",
                    Comparison::Le => "<=",
                    Comparison::Gt => ">",
                    Comparison::Ge => ">=",
                };
                write!(f, "{field} {op} {}", Value::Number(*n))
            }
            Node::Test(field, Predicate::In(values)) => {
                write!(f, "{field} in (")?;
                for (i, v) in values.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{v}")?;
                }
                write!(f, ")")
            }
            Node::Test(field, Predicate::StartsWith(prefix)) => {
                write!(f, "{field} starts_with {}", Quoted(prefix))
            }
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Field::Key => write!(f, "key"),
            Field::Header(name) => write!(f, "header[{}]", Quoted(name.as_bytes())),
            Field::Timestamp => write!(f, "timestamp"),
            Field::Value => write!(f, "value"),
            Field::Json(path) => {
                write!(f, "value")?;
                for step in path.steps.iter() {
                    write!(f, "[{}]", Quoted(step))?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bytes(bytes) => write!(f, "{}", Quoted(bytes)),
            // `{:?}` prints enough digits to read back the same f64.
            Value::Number(n) => write!(f, "{n:?}"),
        }
    }
}

/// Bytes as a string literal of the grammar.
struct Quoted<'a>(&'a [u8]);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"")?;
        for &b in self.0 {
            match b {
                b'"' => write!(f, "\\\"")?,
                b'\\' => write!(f, "\\\\")?,
                b' '..=b'~' => write!(f, "{}", b as char)?,
                _ => write!(f, "\\x{b:02x}")?,
            }
        }
        write!(f, "\"")
    }
}
