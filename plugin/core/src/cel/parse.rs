//! From source text to a tree: the nesting limits and the source adapted to the Pratt parser
//! (checked on the text, before parsing), cel-rust's Pratt parser, then the expansion of the
//! macros it leaves as calls ([`super::macros`]).

use std::borrow::Cow;

use cel::common::ast::IdedExpr;

use super::error::{CelError, compile_error};
use super::macros;

/// Deepest bracket nesting accepted (also the parser's recursion limit).
pub(crate) const MAX_NESTING: usize = 24;
/// Deepest recursion a chain of operators, selections, calls and indexes may create.
pub(crate) const MAX_CHAIN: usize = 64;

/// Parses `source` with cel-rust's Pratt parser and expands the macros it leaves as calls.
///
/// The Pratt parser, not the crate's default ANTLR one, because the ANTLR runtime and its
/// generated parser are about 0.4 MB of each guest (see docs/PERFORMANCE.md, the section on CEL's
/// Pratt parser); the test `the_pratt_parser_builds_what_the_antlr_parser_builds` checks that
/// both build the same trees. Optional syntax (`a.?b`, `a[?b]`, `[?a]`, `{?k: v}`) is on, as in
/// Kubernetes CEL. Callers check [`check_nesting`] first: the parser recurses over the source.
pub(super) fn parse(source: &str) -> Result<IdedExpr, CelError> {
    let source = prepare_source(source)?;
    let parsed = cel::parser::PrattParser::new()
        .enable_optional_syntax(true)
        .max_recursion_depth((MAX_NESTING + 8) as u16)
        .parse(&source)
        .map_err(|e| CelError::Compile(e.to_string()))?;
    macros::expand(parsed)
}

/// Recursion depth of one bracket level (or the whole expression), as the parser builds it.
#[derive(Default)]
struct Level {
    /// Binary operators in the current chain: a left-deep chain nests each under the next.
    ops: usize,
    /// Depth of the current operand: selections, calls, indexes and what their brackets hold.
    operand: usize,
    /// Deepest operand of the current chain.
    max_operand: usize,
    /// Deepest finished chain of this level (`,`, `&&`, `||`, `?`, `:` end a chain).
    best: usize,
}

impl Level {
    fn depth(&self) -> usize {
        self.best.max(self.ops + self.max_operand.max(self.operand))
    }
    fn end_chain(&mut self) {
        *self = Level {
            best: self.depth(),
            ..Level::default()
        };
    }
    fn end_operand(&mut self) {
        self.ops += 1;
        self.max_operand = self.max_operand.max(self.operand);
        self.operand = 0;
    }
}

/// Rejects expressions that would nest too deeply for a fixed-size stack, before parsing.
///
/// cel-rust's parser, checker and interpreter recurse over the expression: a chain like
/// `1 + 1 + ... + 1` (left-deep) or `[[[[...]]]]` needs stack in proportion to its length, and
/// the growable stacks that let Kubernetes accept such expressions do not exist here (a wasm
/// guest has a few hundred KiB). A lexical scan bounds that depth: brackets may nest
/// [`MAX_NESTING`] deep, and the recursion depth a left-deep chain of binary operators,
/// selections, calls and indexes creates may not exceed [`MAX_CHAIN`] (`&&`, `||`, `?:` and `,`
/// start new chains, as the parser keeps those flat or balanced).
pub(super) fn check_nesting(source: &str) -> Result<(), CelError> {
    let bytes = source.as_bytes();
    let mut levels: Vec<Level> = vec![Level::default()];
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let level = levels.len() - 1;
        match b {
            b'"' | b'\'' => {
                let raw = i >= 1
                    && matches!(bytes[i - 1], b'r' | b'R')
                    && (i < 2 || !is_ident(bytes[i - 2]) || matches!(bytes[i - 2], b'b' | b'B'));
                i = skip_string(bytes, i, raw);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = skip_comment(bytes, i);
                continue;
            }
            b'(' | b'[' | b'{' => {
                levels[level].operand += 1;
                levels.push(Level::default());
                if levels.len() > MAX_NESTING + 1 {
                    return Err(compile_error(format!(
                        "expression nests brackets more than {MAX_NESTING} deep"
                    )));
                }
            }
            b')' | b']' | b'}' if level > 0 => {
                let inner = levels.pop().map_or(0, |l| l.depth());
                levels[level - 1].operand += inner;
            }
            b',' | b'?' | b':' => levels[level].end_chain(),
            b'&' | b'|' if bytes.get(i + 1) == Some(&b) => {
                levels[level].end_chain();
                i += 1;
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'!' | b'=' => {
                levels[level].end_operand();
                if bytes.get(i + 1) == Some(&b'=') {
                    i += 1;
                }
            }
            // A selection, not the point of a number.
            b'.' if !(i > 0 && bytes[i - 1].is_ascii_digit() && !ident_before_digits(bytes, i)) => {
                levels[level].operand += 1;
            }
            _ if is_ident(b) => {
                let start = i;
                while i < bytes.len() && is_ident(bytes[i]) {
                    i += 1;
                }
                if &bytes[start..i] == b"in" {
                    levels[level].end_operand();
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    while levels.len() > 1 {
        let inner = levels.pop().map_or(0, |l| l.depth());
        if let Some(parent) = levels.last_mut() {
            parent.operand += inner;
        }
    }
    let depth = levels[0].depth();
    if depth > MAX_CHAIN {
        return Err(compile_error(format!(
            "expression nests {depth} operators, selections, calls or indexes inside each \
             other; at most {MAX_CHAIN} are supported"
        )));
    }
    Ok(())
}

/// Adapts `source` to cel-rust's Pratt parser, which the core parses with (see [`parse`]),
/// where it departs from cel-go's grammar.
///
/// Rejects what the grammar rejects but the Pratt parser accepts: white space other than space,
/// tab, line feed, carriage return and form feed, a line break inside a
/// single-line string literal, the prefix `rb` (raw bytes are `br"..."`), and `!` mixed with a
/// unary `-` (`-!a`, `!-a`, `!-1u`: the grammar allows a unary chain of one operator, and a `-`
/// right after `!` only as the sign of a number literal, as in `!-1`). Blanks the lone comma of
/// an empty list, map or message literal (`[,]`, `{,}`, `Foo{,}`), which the grammar accepts and
/// the Pratt parser does not. Puts a signed number after `!` in parentheses (`!-2.f` is
/// `!(-2).f`), where the Pratt parser would negate the chain that follows the number (`!-(2.f)`),
/// and a space between a number and a word (`7in x`, and `0X7`, which the grammar reads as `0`
/// then `X7`: hexadecimal is `0x` only), where the Pratt parser reads one number; error
/// positions after such an insertion move by one or two columns.
///
/// The test `the_pratt_parser_builds_what_the_antlr_parser_builds` holds the Pratt parser with
/// this step to the same sources and trees as cel-rust's ANTLR parser, built from the grammar.
fn prepare_source(source: &str) -> Result<Cow<'_, str>, CelError> {
    let bytes = source.as_bytes();
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mixed = |at: usize| {
        error_at(
            bytes,
            at,
            "'!' and a unary '-' cannot be mixed without parentheses",
        )
    };
    let mut i = 0;
    // The previous token ends an operand (so a `-` is binary).
    let mut after_operand = false;
    // The previous token is a unary `!` or a unary `-`.
    let (mut after_not, mut after_neg) = (false, false);
    // Edits, in source order: at a position, a replacement for a number of bytes.
    let mut edits: Vec<(usize, &str, usize)> = Vec::new();
    while i < bytes.len() {
        let b = bytes[i];
        let (operand, not, neg) = match b {
            b' ' | b'\t' | b'\r' | b'\n' | b'\x0c' => {
                i += 1;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = skip_comment(bytes, i);
                continue;
            }
            b'"' | b'\'' => {
                i = skip_string_on_its_lines(bytes, i, false)?;
                (true, false, false)
            }
            _ if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while i < bytes.len() && is_ident(bytes[i]) {
                    i += 1;
                }
                let word = &bytes[start..i];
                if matches!(bytes.get(i), Some(b'"' | b'\'')) {
                    let prefix = word.to_ascii_lowercase();
                    if prefix == b"rb" {
                        let msg = "string prefix 'rb': raw bytes literals are written br\"...\"";
                        return Err(error_at(bytes, start, msg));
                    }
                    if matches!(&prefix[..], b"r" | b"b" | b"br") {
                        i = skip_string_on_its_lines(bytes, i, prefix.contains(&b'r'))?;
                    }
                }
                (word != b"in", false, false)
            }
            _ if b.is_ascii_digit()
                || (b == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) && !after_operand) =>
            {
                let end = skip_number(bytes, i).0;
                if bytes
                    .get(end)
                    .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
                {
                    // `7in x`: cel-go's lexer ends the number where a word starts, the Pratt
                    // parser's does not.
                    edits.push((end, " ", 0));
                }
                i = end;
                (true, false, false)
            }
            b'!' if bytes.get(i + 1) != Some(&b'=') => {
                if after_neg {
                    return Err(mixed(i));
                }
                i += 1;
                (false, true, false)
            }
            b'-' if !after_operand => {
                i += 1;
                if after_not {
                    // Only the sign of an int or double literal may follow `!`.
                    let next = skip_space(bytes, i);
                    let number = bytes.get(next).is_some_and(|c| c.is_ascii_digit() || *c == b'.');
                    let (end, unsigned) = skip_number(bytes, next);
                    if !number || unsigned {
                        return Err(mixed(i - 1));
                    }
                    // `!-2.f` is `!((-2).f)`; the Pratt parser would negate `2.f`.
                    edits.push((i - 1, "(", 0));
                    edits.push((end, ")", 0));
                    i = end;
                    (true, false, false)
                } else {
                    (false, false, true)
                }
            }
            b')' | b']' | b'}' => {
                i += 1;
                (true, false, false)
            }
            b'[' | b'{' => {
                let comma = skip_space(bytes, i + 1);
                let close = if b == b'[' { b']' } else { b'}' };
                if bytes.get(comma) == Some(&b',') && bytes.get(skip_space(bytes, comma + 1)) == Some(&close)
                {
                    edits.push((comma, " ", 1));
                }
                i += 1;
                (false, false, false)
            }
            b'!' | b'=' | b'<' | b'>' => {
                i += if bytes.get(i + 1) == Some(&b'=') { 2 } else { 1 };
                (false, false, false)
            }
            _ if b >= 0x80 || b == 0x0B => {
                // Outside strings and comments only ASCII is CEL; white space is space, tab,
                // line feed, carriage return and form feed, where the Pratt parser also skips
                // the other Unicode white space (a vertical tab, a no-break space).
                let c = source.get(i..).and_then(|rest| rest.chars().next());
                let c = c.unwrap_or(char::REPLACEMENT_CHARACTER);
                if c.is_whitespace() {
                    let msg = format!("{c:?} is not white space in CEL");
                    return Err(error_at(bytes, i, &msg));
                }
                i += c.len_utf8().min(bytes.len() - i);
                (false, false, false)
            }
            _ => {
                i += 1;
                (false, false, false)
            }
        };
        (after_operand, after_not, after_neg) = (operand, not, neg);
    }
    if edits.is_empty() {
        return Ok(Cow::Borrowed(source));
    }
    let mut edited = String::with_capacity(source.len() + edits.len());
    let mut from = 0;
    for (at, replacement, len) in edits {
        edited.push_str(&source[from..at]);
        edited.push_str(replacement);
        from = at + len;
    }
    edited.push_str(&source[from..]);
    Ok(Cow::Owned(edited))
}

/// The index just past the string literal opening at `start`; a single-line literal (not
/// triple-quoted) may not hold a line break.
fn skip_string_on_its_lines(bytes: &[u8], start: usize, raw: bool) -> Result<usize, CelError> {
    let end = skip_string(bytes, start, raw);
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    if !triple && bytes[start..end].iter().any(|&c| c == b'\n' || c == b'\r') {
        return Err(error_at(
            bytes,
            start,
            "a line break inside a single-line string literal",
        ));
    }
    Ok(end)
}

/// A compile error at byte `at` of the source, placed as the parser places its errors
/// (`<input>:line:column`, both from 1, the column in characters).
fn error_at(bytes: &[u8], at: usize, msg: &str) -> CelError {
    let before = &bytes[..at];
    let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |n| n + 1);
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    // Characters, not bytes: count the bytes that start a UTF-8 sequence.
    let column = 1 + before[line_start..].iter().filter(|&&b| b & 0xC0 != 0x80).count();
    compile_error(format!("ERROR: <input>:{line}:{column}: {msg}"))
}

/// The index just past the `//` comment starting at `start`.
fn skip_comment(bytes: &[u8], start: usize) -> usize {
    bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |n| start + n)
}

/// The index of the first byte from `start` that is not white space or part of a comment.
fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b' ' | b'\t' | b'\r' | b'\n' | b'\x0c' => i += 1,
            b'/' if bytes.get(i + 1) == Some(&b'/') => i = skip_comment(bytes, i),
            _ => break,
        }
    }
    i
}

/// The index just past the number literal at `start` (`12`, `0x1F`, `1.5e-3`, `.5`, `3u`), and
/// whether it is unsigned.
fn skip_number(bytes: &[u8], start: usize) -> (usize, bool) {
    let digits = |mut i: usize, hex: bool| {
        while bytes
            .get(i)
            .is_some_and(|b| b.is_ascii_digit() || (hex && b.is_ascii_hexdigit()))
        {
            i += 1;
        }
        i
    };
    let mut i = start;
    // Hexadecimal with a lower-case `0x` only, as in cel-go's grammar (`0X1` is `0` then `X1`).
    if bytes.get(i) == Some(&b'0') && bytes.get(i + 1) == Some(&b'x') {
        i = digits(i + 2, true);
    } else {
        i = digits(i, false);
        let mut double = false;
        if bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i = digits(i + 1, false);
            double = true;
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(bytes.get(i + 1), Some(b'+' | b'-')));
            if bytes.get(i + 1 + sign).is_some_and(u8::is_ascii_digit) {
                i = digits(i + 1 + sign, false);
                double = true;
            }
        }
        if double {
            return (i, false);
        }
    }
    if matches!(bytes.get(i), Some(b'u' | b'U')) {
        (i + 1, true)
    } else {
        (i, false)
    }
}

/// Whether the digits ending at `dot` belong to an identifier (`a1.b`) rather than a number.
fn ident_before_digits(bytes: &[u8], dot: usize) -> bool {
    let mut j = dot;
    while j > 0 && bytes[j - 1].is_ascii_digit() {
        j -= 1;
    }
    j > 0 && (bytes[j - 1].is_ascii_alphabetic() || bytes[j - 1] == b'_')
}

/// The index just past the string literal opening at `start` (single, double or triple quotes).
fn skip_string(bytes: &[u8], start: usize, raw: bool) -> usize {
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    while i < bytes.len() {
        if bytes[i] == b'\\' && !raw {
            i += 2;
            continue;
        }
        if bytes[i] == quote {
            if !triple {
                return i + 1;
            }
            if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                return i + 3;
            }
        }
        i += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_nesting_before_parsing() {
        let chain = |n: usize, op: &str| vec!["x"; n + 1].join(op);
        let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let selects = |n: usize| format!("x{}", ".f".repeat(n));
        let cases: Vec<(String, Option<&str>, &str)> = vec![
            ("1 + 1".into(), None, "trivial"),
            (chain(MAX_CHAIN, " + "), None, "longest accepted operator chain"),
            (
                chain(MAX_CHAIN + 1, " + "),
                Some("at most 64"),
                "operator chain too long",
            ),
            (
                chain(MAX_CHAIN + 1, " <= "),
                Some("at most 64"),
                "comparison chain too long",
            ),
            (chain(2000, " && "), None, "&& chains are balanced by the parser"),
            (chain(2000, ", "), None, "comma-separated items are siblings"),
            (format!("[{}]", chain(2000, ", ")), None, "a long list literal"),
            (nested(MAX_NESTING), None, "deepest accepted brackets"),
            (
                nested(MAX_NESTING + 1),
                Some("more than 24 deep"),
                "brackets too deep",
            ),
            (selects(MAX_CHAIN), None, "longest accepted selection chain"),
            (
                selects(MAX_CHAIN + 1),
                Some("at most 64"),
                "selection chain too long",
            ),
            (
                format!("f({}) + 1", chain(MAX_CHAIN, " + ")),
                Some("at most 64"),
                "a chain inside a call adds to the call's chain",
            ),
            (
                format!("\"{}\" == x", "(+".repeat(100)),
                None,
                "string contents do not count",
            ),
            (
                format!("'{}' == x", "[".repeat(100)),
                None,
                "single-quoted string contents",
            ),
            (
                format!("\"\"\"{}\"\"\" == x", "(\"".repeat(50)),
                None,
                "triple-quoted string contents",
            ),
            (
                format!("r\"\\\" == {}", chain(MAX_CHAIN, " + ")),
                Some("at most 64"),
                "a raw string ends at its first quote",
            ),
            (
                format!("\"\\\" == {}\" == x", chain(MAX_CHAIN, " + ")),
                None,
                "an escaped quote does not end a string",
            ),
            (
                format!("x // {}\n == 1", "(".repeat(100)),
                None,
                "comments do not count",
            ),
            (
                format!("{} == 1.5", chain(MAX_CHAIN - 1, " + ")),
                None,
                "a decimal point is not a selection",
            ),
        ];
        for (source, error, msg) in cases {
            match (check_nesting(&source), error) {
                (Ok(()), None) => {}
                (Err(CelError::Compile(e)), Some(want)) => assert!(e.contains(want), "{msg}: {e}"),
                (got, _) => panic!("{msg}: {got:?}"),
            }
        }
    }
}
