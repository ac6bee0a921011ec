//! The top-level fields of a record's JSON value, found in one pass: a
//! record evaluated against many filters reads `value.a`, `value.b` and
//! `value.c.d` from this table instead of parsing the value from its
//! start for each.

/// Most fields the table holds; a key past them is looked for by parsing.
const FIELDS_MAX: usize = 16;

/// Each top-level key (as written) with the bytes of its value, in order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TopLevel<'a> {
    fields: [(&'a [u8], &'a [u8]); FIELDS_MAX],
    count: usize,
    /// A key not in the table may still be in the value: the table is
    /// full, a key was written with escapes, or the JSON is damaged past
    /// the fields read.
    partial: bool,
}

impl<'a> TopLevel<'a> {
    /// Reads the top-level fields of `value`; a value that is not an
    /// object has none.
    pub(crate) fn scan(value: &'a [u8]) -> Self {
        let mut table = Self {
            fields: [(&[][..], &[][..]); FIELDS_MAX],
            count: 0,
            partial: false,
        };
        let mut json = jiter::Jiter::new(value);
        let mut key = match json.next_object() {
            Ok(Some(key)) => borrowed(value, key),
            Ok(None) => return table,
            // Not an object (or not JSON): no field is there, as a lookup
            // by parsing finds too.
            Err(_) => return table,
        };
        loop {
            let Some(name) = key else {
                table.partial = true;
                return table;
            };
            if table.count == FIELDS_MAX {
                table.partial = true;
                return table;
            }
            let Ok(peek) = json.peek() else {
                table.partial = true;
                return table;
            };
            let start = json.current_index();
            if json.known_skip(peek).is_err() {
                table.partial = true;
                return table;
            }
            table.fields[table.count] = (name, json.slice_to_current(start));
            table.count += 1;
            key = match json.next_key() {
                Ok(Some(next)) => borrowed(value, next),
                Ok(None) => return table,
                Err(_) => {
                    table.partial = true;
                    return table;
                }
            };
        }
    }

    /// The bytes of field `name`'s value: `Some(Some(_))` found,
    /// `Some(None)` surely not there, `None` unknown (look it up by
    /// parsing the value).
    pub(crate) fn get(&self, name: &[u8]) -> Option<Option<&'a [u8]>> {
        match self.fields[..self.count]
            .iter()
            .find(|(key, _)| *key == name)
        {
            Some((_, value)) => Some(Some(value)),
            None if self.partial => None,
            None => Some(None),
        }
    }
}

/// `key` as bytes of `value`, when the parser handed out the text as it
/// is written there; `None` when it had escapes and was decoded elsewhere
/// (its bytes then differ from its text).
fn borrowed<'a>(value: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let start = (key.as_ptr() as usize).checked_sub(value.as_ptr() as usize)?;
    value.get(start..start + key.len())
}
