//! Turns a value's `{:?}` text into JSON, so that `strata_stats_json` can
//! report `strata::Stats` (which implements `Debug`) without the engine
//! depending on serde.
//!
//! Mapping: `Name { a: 1 }` → `{"a": 1}`; `Some(x)` / one-field tuple
//! structs → `x`; `None` → `null`; other bare identifiers (enum variants) →
//! strings; `[..]` and tuples → arrays; `{k: v}` maps → objects with string
//! keys; a number with a unit (`1.5ms`, a `Duration`) → string.
//! Invariant: never fails; text it cannot parse becomes `{"debug": text}`.

use serde_json::{Map, Number, Value};

pub fn debug_to_json(text: &str) -> Value {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    match p.value() {
        Some(v) if p.at_end() => v,
        _ => serde_json::json!({ "debug": text }),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn at_end(&mut self) -> bool {
        self.ws();
        self.i == self.s.len()
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> Option<String> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || b"_:".contains(&self.s[self.i]))
        {
            // `::` inside paths is part of the name; a single `:` ends a field name.
            if self.s[self.i] == b':' && self.s.get(self.i + 1) != Some(&b':') {
                break;
            }
            self.i += if self.s[self.i] == b':' { 2 } else { 1 };
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn value(&mut self) -> Option<Value> {
        match self.peek()? {
            b'"' | b'\'' => self.string().map(Value::String),
            b'[' => {
                self.i += 1;
                self.seq(b']').map(Value::Array)
            }
            b'(' => {
                self.i += 1;
                self.seq(b')').map(Value::Array)
            }
            b'{' => {
                self.i += 1;
                self.map()
            }
            c if c == b'-' || c.is_ascii_digit() => self.number(),
            _ => {
                let name = self.ident()?;
                match self.peek() {
                    Some(b'{') => {
                        self.i += 1;
                        self.fields()
                    }
                    Some(b'(') => {
                        self.i += 1;
                        let mut items = self.seq(b')')?;
                        Some(if items.len() == 1 {
                            items.pop()?
                        } else {
                            Value::Array(items)
                        })
                    }
                    _ => Some(match name.as_str() {
                        "None" => Value::Null,
                        "true" => Value::Bool(true),
                        "false" => Value::Bool(false),
                        _ => Value::String(name),
                    }),
                }
            }
        }
    }

    fn seq(&mut self, close: u8) -> Option<Vec<Value>> {
        let mut out = Vec::new();
        loop {
            if self.eat(close) {
                return Some(out);
            }
            out.push(self.value()?);
            if !self.eat(b',') {
                return self.eat(close).then_some(out);
            }
        }
    }

    fn fields(&mut self) -> Option<Value> {
        let mut m = Map::new();
        loop {
            if self.eat(b'}') {
                return Some(Value::Object(m));
            }
            if self.eat(b'.') {
                // `..` of a non-exhaustive Debug
                self.eat(b'.');
                continue;
            }
            let k = self.ident()?;
            if !self.eat(b':') {
                return None;
            }
            let v = self.value()?;
            m.insert(k, v);
            if !self.eat(b',') {
                return self.eat(b'}').then_some(Value::Object(m));
            }
        }
    }

    fn map(&mut self) -> Option<Value> {
        let start = self.i;
        self.map_strict().or_else(|| {
            self.i = start;
            self.map_loose()
        })
    }

    fn map_strict(&mut self) -> Option<Value> {
        let mut m = Map::new();
        loop {
            if self.eat(b'}') {
                return Some(Value::Object(m));
            }
            let k = match self.value()? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            if !self.eat(b':') {
                return None;
            }
            m.insert(k, self.value()?);
            if !self.eat(b',') {
                return self.eat(b'}').then_some(Value::Object(m));
            }
        }
    }

    /// A map printed by a hand-written `Debug` (`{log.Read: 3 ops, 12 bytes}`):
    /// entries split at top-level commas; a piece without a top-level `:`
    /// continues the previous value; values stay text.
    fn map_loose(&mut self) -> Option<Value> {
        let mut m = Map::new();
        let mut last: Option<String> = None;
        loop {
            let piece = self.raw_until(b",}")?;
            let end = self.s[self.i];
            self.i += 1;
            let piece = piece.trim();
            if !piece.is_empty() {
                match split_top_level_colon(piece) {
                    Some((k, v)) => {
                        let k = k.trim().trim_matches('"').to_string();
                        m.insert(k.clone(), Value::String(v.trim().to_string()));
                        last = Some(k);
                    }
                    None => {
                        let prev = m.get_mut(last.as_ref()?)?;
                        if let Value::String(text) = prev {
                            text.push_str(", ");
                            text.push_str(piece);
                        }
                    }
                }
            }
            if end == b'}' {
                return Some(Value::Object(m));
            }
        }
    }

    /// Text up to (not including) the first of `stops` outside brackets and
    /// quotes; `None` at the end of input.
    fn raw_until(&mut self, stops: &[u8]) -> Option<String> {
        let start = self.i;
        let mut depth = 0usize;
        let mut quote: Option<u8> = None;
        while self.i < self.s.len() {
            let c = self.s[self.i];
            match quote {
                Some(_) if c == b'\\' => self.i += 1,
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == b'"' => quote = Some(c),
                None if depth == 0 && stops.contains(&c) => {
                    return Some(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
                }
                None if b"{[(".contains(&c) => depth += 1,
                None if b"}])".contains(&c) => depth = depth.saturating_sub(1),
                None => {}
            }
            self.i += 1;
        }
        None
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_digit() || b"-+.eE_".contains(&self.s[self.i]))
        {
            self.i += 1;
        }
        let num = std::str::from_utf8(&self.s[start..self.i])
            .ok()?
            .replace('_', "");
        let unit_start = self.i;
        while self.i < self.s.len() && !b",)]} ".contains(&self.s[self.i]) {
            self.i += 1;
        }
        if self.i > unit_start {
            let all = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
            return Some(Value::String(all));
        }
        if let Ok(n) = num.parse::<u64>() {
            return Some(Value::Number(n.into()));
        }
        if let Ok(n) = num.parse::<i64>() {
            return Some(Value::Number(n.into()));
        }
        num.parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
    }

    fn string(&mut self) -> Option<String> {
        let quote = self.s[self.i];
        self.i += 1;
        let mut out = Vec::new();
        while self.i < self.s.len() {
            let c = self.s[self.i];
            self.i += 1;
            if c == quote {
                return Some(String::from_utf8_lossy(&out).into_owned());
            }
            if c == b'\\' && self.i < self.s.len() {
                let e = self.s[self.i];
                self.i += 1;
                out.push(match e {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'0' => 0,
                    other => other,
                });
            } else {
                out.push(c);
            }
        }
        None
    }
}

/// `key: value` split at the first `:` outside brackets and quotes that is
/// not part of a `::` path.
fn split_top_level_colon(text: &str) -> Option<(&str, &str)> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut in_quote = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => in_quote = !in_quote,
            b'{' | b'[' | b'(' if !in_quote => depth += 1,
            b'}' | b']' | b')' if !in_quote => depth = depth.saturating_sub(1),
            b':' if !in_quote && depth == 0 => {
                if b.get(i + 1) == Some(&b':') {
                    i += 2;
                    continue;
                }
                return Some((&text[..i], &text[i + 1..]));
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[derive(Debug)]
    #[allow(dead_code)]
    struct Inner {
        ops: u64,
        bytes: u64,
    }

    #[derive(Debug)]
    #[allow(dead_code)]
    enum Mode {
        DirectRw,
    }

    #[derive(Debug)]
    #[allow(dead_code)]
    struct Stats {
        writes: u64,
        ratio: f64,
        neg: i32,
        mode: Mode,
        last: Option<u64>,
        none: Option<u64>,
        per_class: Vec<Inner>,
        path: std::path::PathBuf,
        took: Duration,
        map: std::collections::BTreeMap<String, u32>,
        pair: (u8, bool),
    }

    #[test]
    fn a_nested_debug_struct_becomes_json() {
        let s = Stats {
            writes: 3,
            ratio: 1.5,
            neg: -2,
            mode: Mode::DirectRw,
            last: Some(7),
            none: None,
            per_class: vec![Inner {
                ops: 1,
                bytes: 4096,
            }],
            path: "/a \"b\"".into(),
            took: Duration::from_micros(1500),
            map: [("k".to_string(), 1)].into_iter().collect(),
            pair: (1, true),
        };
        for text in [format!("{s:?}"), format!("{s:#?}")] {
            let v = debug_to_json(&text);
            assert_eq!(v["writes"], 3, "{text}");
            assert_eq!(v["ratio"], 1.5);
            assert_eq!(v["neg"], -2);
            assert_eq!(v["mode"], "DirectRw");
            assert_eq!(v["last"], 7);
            assert!(v["none"].is_null());
            assert_eq!(v["per_class"][0]["bytes"], 4096);
            assert_eq!(v["path"], "/a \"b\"");
            assert_eq!(v["took"], "1.5ms");
            assert_eq!(v["map"]["k"], 1);
            assert_eq!(v["pair"][1], true);
        }
    }

    #[test]
    fn a_hand_written_debug_map_keeps_its_entries_as_text() {
        let v = debug_to_json(
            "Stats { n: 1, io: {log.Read: 28 ops, 4096 bytes, delta.Write: 1 ops, 8 bytes} }",
        );
        assert_eq!(v["n"], 1, "{v}");
        assert_eq!(v["io"]["log.Read"], "28 ops, 4096 bytes");
        assert_eq!(v["io"]["delta.Write"], "1 ops, 8 bytes");
    }

    #[test]
    fn unparsable_text_is_kept_as_a_string() {
        assert_eq!(debug_to_json("Stats { a: ")["debug"], "Stats { a: ");
    }
}
