//! JSON values read in one pass ([`parse`]), with numbers read exactly, and the canonical text of
//! a value: what `serde_json` writes for the `serde_json::Value` it reads, compact with object keys
//! in order.
//!
//! Opaque configuration parameters are kept as canonical text ([`crate::model::Parameters`]) and
//! read by CEL extractors from it. Their numbers must be read as the nearest double, as Go's
//! `encoding/json` reads them, or a stored claim writes back another number than it read.
//! serde_json reads them exactly only with its `float_roundtrip` feature (about 30 KB of each
//! guest); here they are read by Rust's own exact parser (`f64::from_str`, already in the guests),
//! and serde_json's parser never sees a number whose value matters.

use std::borrow::Cow;

use serde::de::Error as _;

/// Nesting that [`parse`] (and so [`canonical`]) accepts, as serde_json's own
/// limit for a document: deeper text is an error, not a deep recursion.
pub const MAX_NESTING: usize = 128;

/// A JSON number as serde_json's `Value` holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    /// An integer without sign, fraction or exponent within `u64`.
    U64(u64),
    /// A negative integer within `i64` (not `-0`).
    I64(i64),
    /// Anything else, as the nearest double (`-0` is `-0.0`).
    F64(f64),
}

impl Number {
    /// Writes the number as serde_json writes it (`1.0`, `1e20`, `-0.0`).
    fn write(self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        match self {
            Number::U64(n) => serde_json::to_writer(out, &n),
            Number::I64(n) => serde_json::to_writer(out, &n),
            Number::F64(n) => serde_json::to_writer(out, &n),
        }
    }
}

/// A JSON value, its numbers read exactly ([`number`]) and its strings borrowed from the text
/// unless they have escapes.
#[derive(Debug, PartialEq)]
pub enum Json<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, read exactly.
    Number(Number),
    /// A string, unescaped.
    String(Cow<'a, str>),
    /// An array's elements, in order.
    Array(Vec<Json<'a>>),
    /// An object's members, in order (a key written twice appears twice).
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

/// The JSON value `text` (the whole text, whitespace around it allowed), read in one pass over
/// the text: serde_json checks it first, building nothing, then a walk over text known to be JSON
/// builds the value. Nesting beyond [`MAX_NESTING`] is an error.
pub fn parse(text: &str) -> Result<Json<'_>, serde_json::Error> {
    serde_json::from_str::<serde::de::IgnoredAny>(text)?;
    Walk { text, at: 0 }.value(MAX_NESTING)
}

/// A walk over text that serde_json has checked: it only finds where each token ends. A text that
/// is not JSON gets an error, never a panic, but not necessarily serde_json's error.
struct Walk<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Walk<'a> {
    /// The next byte after whitespace (0 at the end).
    fn peek(&mut self) -> u8 {
        let bytes = self.text.as_bytes();
        while bytes
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
        bytes.get(self.at).copied().unwrap_or(0)
    }

    fn value(&mut self, depth: usize) -> Result<Json<'a>, serde_json::Error> {
        Ok(match self.peek() {
            b'{' => Json::Object(self.items(b'}', depth, |walk, depth| {
                let key = walk.string()?;
                walk.peek();
                walk.at += 1; // the `:`
                Ok((key, walk.value(depth)?))
            })?),
            b'[' => Json::Array(self.items(b']', depth, Self::value)?),
            b'"' => Json::String(self.string()?),
            b't' => self.literal("true", Json::Bool(true)),
            b'f' => self.literal("false", Json::Bool(false)),
            b'n' => self.literal("null", Json::Null),
            _ => {
                let start = self.at;
                let bytes = self.text.as_bytes();
                while bytes
                    .get(self.at)
                    .is_some_and(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                {
                    self.at += 1;
                }
                Json::Number(number(&self.text[start..self.at])?)
            }
        })
    }

    /// The members or elements of the object or array at the cursor, each read by `item`, up to
    /// `close`.
    fn items<T>(
        &mut self,
        close: u8,
        depth: usize,
        mut item: impl FnMut(&mut Self, usize) -> Result<T, serde_json::Error>,
    ) -> Result<Vec<T>, serde_json::Error> {
        let depth = nested(depth)?;
        self.at += 1;
        let mut items = Vec::new();
        loop {
            match self.peek() {
                b if b == close => break,
                b',' => self.at += 1,
                0 => return Err(unexpected_end()),
                _ => items.push(item(self, depth)?),
            }
        }
        self.at += 1;
        Ok(items)
    }

    fn literal(&mut self, word: &str, value: Json<'a>) -> Json<'a> {
        self.at += word.len();
        value
    }

    /// The string at the cursor, unescaped by serde_json when it has escapes.
    fn string(&mut self) -> Result<Cow<'a, str>, serde_json::Error> {
        if self.peek() != b'"' {
            return Err(serde_json::Error::custom("expected a string"));
        }
        let bytes = self.text.as_bytes();
        let start = self.at;
        let mut end = start + 1;
        let mut escaped = false;
        loop {
            match bytes.get(end) {
                Some(b'"') => break,
                // The escaped character is ASCII: `\"`, `\\`, `\u` and the others.
                Some(b'\\') => {
                    escaped = true;
                    end += 2;
                }
                Some(_) => end += 1,
                None => return Err(unexpected_end()),
            }
        }
        self.at = end + 1;
        let raw = &self.text[start..=end];
        if escaped {
            serde_json::from_str(raw).map(Cow::Owned)
        } else {
            Ok(Cow::Borrowed(&raw[1..raw.len() - 1]))
        }
    }
}

fn unexpected_end() -> serde_json::Error {
    serde_json::Error::custom("unexpected end of JSON text")
}

/// The JSON number `text`, classified as serde_json classifies it and read exactly. `text` is
/// checked for the characters of a JSON number only (it comes from serde_json's raw values, which
/// are checked numbers): `inf`, `NaN` and `+1` are errors.
pub fn number(text: &str) -> Result<Number, serde_json::Error> {
    let t = text.trim_matches([' ', '\t', '\n', '\r']);
    let bytes = t.as_bytes();
    let digits = bytes.first().is_some_and(|&b| b == b'-' || b.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'));
    if !digits {
        return Err(serde_json::Error::custom(format!("invalid number {t:?}")));
    }
    let integer = !bytes.iter().any(|b| matches!(b, b'.' | b'e' | b'E'));
    let n = if integer && bytes[0] != b'-' {
        t.parse().map(Number::U64).ok()
    } else if integer {
        // serde_json reads `-0` as the double -0.0.
        t.parse().ok().filter(|&n: &i64| n != 0).map(Number::I64)
    } else {
        None
    };
    if let Some(n) = n {
        return Ok(n);
    }
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok(Number::F64(f)),
        Ok(_) => Err(serde_json::Error::custom(format!("number out of range: {t}"))),
        Err(e) => Err(serde_json::Error::custom(format!("invalid number {t:?}: {e}"))),
    }
}

/// The canonical text of the JSON value `text`: what serde_json writes for the `Value` it reads
/// from it (compact; object keys sorted, the last of a repeated key kept; numbers as
/// [`number`] reads them, written as serde_json writes them), with numbers read exactly. One
/// pass over the text ([`parse`]) and one over the value. Nesting beyond [`MAX_NESTING`] is an
/// error.
pub fn canonical(text: &str) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(text.len());
    write_canonical(&parse(text)?, &mut out)?;
    String::from_utf8(out).map_err(serde_json::Error::custom)
}

fn write_canonical(value: &Json<'_>, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    match value {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Json::Number(n) => n.write(out)?,
        Json::String(s) => serde_json::to_writer(&mut *out, s.as_ref())?,
        Json::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
        }
        Json::Object(members) => {
            // Keys in order, the last of a repeated key kept, as the model's maps keep them.
            let members: crate::map::Map<&str, &Json<'_>> =
                members.iter().map(|(k, v)| (k.as_ref(), v)).collect();
            out.push(b'{');
            for (i, (key, value)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key)?;
                out.push(b':');
                write_canonical(value, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// The depth left inside one more array or object.
fn nested(depth: usize) -> Result<usize, serde_json::Error> {
    depth
        .checked_sub(1)
        .ok_or_else(|| serde_json::Error::custom("recursion limit exceeded"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::fixtures::{CLUSTERS, pointers};
    use serde_json::Value;

    /// What serde_json writes for the `Value` it reads. Its numbers may be off by a unit in the
    /// last place when serde_json is built without `float_roundtrip` (as in `cargo test -p
    /// sharing-affinity-core`; the host enables it), so number cases are checked against Rust's
    /// exact parser instead.
    fn oracle(text: &str) -> Result<String, serde_json::Error> {
        serde_json::from_str::<Value>(text).map(|v| v.to_string())
    }

    #[test]
    fn numbers_are_classified_as_serde_json_does_and_read_exactly() {
        let cases = [
            "0",
            "-0",
            "-0.0",
            "7",
            "-7",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "9333333000000629387372",
            "9.333333000000628e+21",
            "2.2250738585072011e-308",
            "0.30000000000000004",
            "1.7976931348623157e308",
            "4.9e-324",
            "1e-400",
            "9007199254740993",
            "1.0",
            "1E2",
            "2.5e-3",
            "1e20",
            "100000000000000000000",
        ];
        for n in cases {
            let Value::Number(parsed) = serde_json::from_str::<Value>(n).unwrap() else {
                panic!("{n} is a number");
            };
            // serde_json's class; the nearest double as Rust's exact parser reads it.
            let want = match (parsed.as_u64(), parsed.as_i64()) {
                (Some(u), _) => Number::U64(u),
                (None, Some(i)) => Number::I64(i),
                _ => Number::F64(n.parse().unwrap()),
            };
            let got = number(n).unwrap();
            let same = match (got, want) {
                (Number::F64(a), Number::F64(b)) => a.to_bits() == b.to_bits(),
                (a, b) => a == b,
            };
            assert!(same, "{n}: read {got:?}, want {want:?}");
            let text = match want {
                Number::U64(u) => u.to_string(),
                Number::I64(i) => i.to_string(),
                Number::F64(f) => serde_json::to_string(&f).unwrap(),
            };
            assert_eq!(canonical(n).unwrap(), text, "{n}");
            assert_eq!(text.parse::<f64>().ok(), n.parse::<f64>().ok(), "{n} reads back");
        }
        for bad in ["1e400", "-1e400", "inf", "NaN", "+1", "", "1x"] {
            assert!(number(bad).is_err(), "{bad:?} is not a JSON number in range");
        }
        assert!(canonical("1e400").is_err() && oracle("1e400").is_err());
    }

    #[test]
    fn canonical_text_is_what_serde_json_writes_for_its_value() {
        // Numbers here are short: serde_json reads them exactly with or without `float_roundtrip`.
        let cases = [
            r#"{"b": 1, "a": [true, false, null, "x\u00e9\n\"", {"z": {}, "y": []}]}"#,
            r#"{"k": 1, "k": 2, "j": {"k": "first", "k": "last"}}"#,
            r#" [ 1 , -0 , 2.50 , 1e2 , "\ud83d\ude00" , "\u0001" ] "#,
            r#""just a string""#,
            "null",
            "true",
            r#"{"":0,"é":1,"e":2,"E":3}"#,
        ];
        for text in cases {
            assert_eq!(canonical(text).unwrap(), oracle(text).unwrap(), "{text}");
        }
        // Every object, array and scalar of the recorded clusters.
        let mut checked = 0;
        for cluster in CLUSTERS {
            let value: Value = serde_json::from_str(cluster).unwrap();
            let mut at = Vec::new();
            pointers(&value, String::new(), &mut at);
            for p in &at {
                let node = &value.pointer(p).unwrap();
                for text in [node.to_string(), serde_json::to_string_pretty(node).unwrap()] {
                    assert_eq!(canonical(&text).unwrap(), oracle(&text).unwrap(), "{p}");
                    checked += 1;
                }
            }
            assert_eq!(canonical(cluster).unwrap(), oracle(cluster).unwrap());
        }
        assert!(checked > 2_000, "{checked} nodes");
    }

    #[test]
    fn parse_reads_the_whole_text_in_one_tree() {
        let text = " { \"a\" : [ 1 , -2 , 2.5 , \"x\" , \"y\\n\" , { } , [ ] ] , \"a\" : null , \"\\u00e9\" : true } ";
        let Json::Object(members) = parse(text).unwrap() else {
            panic!("an object");
        };
        let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(keys, ["a", "a", "é"], "members in order, a repeated key twice");
        let Json::Array(items) = &members[0].1 else {
            panic!("an array");
        };
        assert_eq!(
            items[..3],
            [
                Json::Number(Number::U64(1)),
                Json::Number(Number::I64(-2)),
                Json::Number(Number::F64(2.5))
            ]
        );
        assert!(
            matches!(&items[3], Json::String(Cow::Borrowed("x"))),
            "unescaped: borrowed"
        );
        assert!(
            matches!(&items[4], Json::String(Cow::Owned(s)) if s == "y\n"),
            "escaped: read"
        );
        assert_eq!(items[5..], [Json::Object(Vec::new()), Json::Array(Vec::new())]);
        assert_eq!(members[1].1, Json::Null);
        assert_eq!(members[2].1, Json::Bool(true));
        for bad in [
            "1 2",
            "{} x",
            "[1] ]",
            "\"a\" \"b\"",
            "[\"\\x\"]",
            "{\"a\" 1}",
            "\"\u{1}\"",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
            assert!(oracle(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn invalid_values_are_errors_where_serde_json_fails_too() {
        for text in [
            r#"{"k": 1e400, "k": 1}"#,
            r#"["\ud800"]"#,
            r#"{"a": tru}"#,
            "[1,]",
            "",
            "nul",
        ] {
            assert!(canonical(text).is_err(), "{text}");
            assert!(oracle(text).is_err(), "{text}");
        }
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(canonical(&deep(MAX_NESTING)).is_ok());
        let err = canonical(&deep(MAX_NESTING + 1)).unwrap_err().to_string();
        assert!(err.contains("recursion limit"), "{err}");
        assert!(canonical(&deep(100_000)).is_err(), "no deep recursion");
    }
}
