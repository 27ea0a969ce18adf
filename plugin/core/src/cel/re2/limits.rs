//! The compile-time limits of Go's `regexp/syntax`, checked on the parsed pattern, with Go's
//! messages.
//!
//! Go refuses a pattern for its shape, whatever it matches, with the message
//! ``error parsing regexp: CODE: `TEXT` ``:
//!
//! | Go refuses | code | text named |
//! |---|---|---|
//! | a count over 1000 (`a{1001}`, `a{0,1001}`), a minimum above the maximum (`a{2,1}`) | `invalid repeat count` | the braces |
//! | counted repetitions nested so that the counts multiply past 1000 (`(a{10}){101}`) | `invalid repeat count` | the outer braces |
//! | a repetition operator right after another (`a**`, `a{2}*`) | `invalid nested repetition operator` | both operators |
//! | a program of more than 3,355,443 instructions (`((abcdefghij){1000}x){1000}`) | `expression too large` | the pattern |
//!
//! Go finds them as it reads the pattern, so the first one in reading order is reported: a
//! repetition's count first, then the operator before it, then the size, then the counts nested
//! inside it. The walk here visits each repetition after its operand, which is Go's order.
//!
//! The size is Go's estimate of the compiled program, computed on the pattern's tree: a literal
//! character is one instruction, a class, `.` or an assertion one, a capture two around its
//! operand, `*` two, `+` and `?` one, `|` one per alternative after the first, and a counted
//! repetition its operand times the count (plus one per optional copy, or one for an unbounded
//! one). Go simplifies alternations of single characters into a class before it counts, and so
//! does this estimate; it does not factor common prefixes out of alternatives (`ab|ac`), which
//! Go does, so a pattern within a few instructions of the limit may be refused here and not in
//! Go.
//!
//! The matcher's own limit is below Go's: a pattern whose compiled program takes more than
//! 10 MiB of its memory is refused with its message (`compiled regex exceeded size limit`),
//! whether or not Go would compile it.
//!
//! Not checked: Go's limit on the runes of all classes (33,554,432), which a pattern within the
//! 10 KiB Kubernetes allows a CEL expression cannot reach (the largest Unicode class holds a few
//! thousand ranges), and Go's nesting limit (a tree 1000 high), which `regex-syntax`'s own
//! nesting limit (250) refuses first, with its own message.

use regex_syntax::ast::{self, Ast, RepetitionKind, RepetitionRange};

/// The largest count of a counted repetition, and of nested counted repetitions multiplied.
const MAX_REPEAT: u64 = 1000;
/// The largest program Go compiles, in instructions (128 MiB of 40-byte instructions).
const MAX_SIZE: u64 = (128 << 20) / 40;

/// ``error parsing regexp: <code>: `<text>` ``, as Go writes its parse errors.
fn go_error(code: &str, text: &str) -> String {
    format!("error parsing regexp: {code}: `{text}`")
}

/// Checks a parsed pattern against Go's limits: `Err` with Go's message for the first one it
/// exceeds.
pub(super) fn check(pattern: &str, tree: &Ast) -> Result<(), String> {
    let shape = walk(pattern, tree)?;
    too_large(pattern, shape.size)
}

/// The message for a pattern `regex-syntax` could not parse: Go's `invalid repeat count` where
/// `regex-syntax` refused a count (a minimum above the maximum, a number past 32 bits) and Go
/// refuses it too, else `regex-syntax`'s own.
pub(super) fn parse_error(pattern: &str, err: ast::Error) -> String {
    if matches!(
        err.kind(),
        ast::ErrorKind::RepetitionCountInvalid | ast::ErrorKind::DecimalInvalid
    ) && let Some(braces) = braces_at(pattern, err.span().start.offset)
    {
        return go_error("invalid repeat count", braces);
    }
    regex_syntax::Error::from(err).to_string()
}

/// The `{…}` of a counted repetition that holds byte `at` of `pattern` (or starts there).
fn braces_at(pattern: &str, at: usize) -> Option<&str> {
    let open = pattern.get(..=at)?.rfind('{')?;
    let close = open + pattern[open..].find('}')?;
    let inside = &pattern[open + 1..close];
    let count = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    let valid = match inside.split_once(',') {
        None => count(inside),
        Some((min, max)) => count(min) && (max.is_empty() || count(max)),
    };
    (valid && close >= at).then(|| &pattern[open..=close])
}

/// What the walk learns of a subtree.
#[derive(Clone, Copy)]
struct Shape {
    /// Go's size estimate, saturating.
    size: u64,
    /// The largest product of the counts of counted repetitions on one path down the subtree
    /// (Go's "nested repeat" rule: a count of 0 ends a path, `*`, `+` and `?` count 1).
    repeat: u64,
    /// Whether Go holds the subtree as one character class (a character, a class, `.`, or an
    /// alternation of those): an alternation of them is one instruction.
    one_char: bool,
}

impl Shape {
    fn leaf(one_char: bool) -> Shape {
        Shape {
            size: 1,
            repeat: 1,
            one_char,
        }
    }
}

/// Walks `tree` in Go's reading order (operands before their operators), checking each
/// repetition. Recursion is bounded by `regex-syntax`'s nesting limit.
fn walk(pattern: &str, tree: &Ast) -> Result<Shape, String> {
    Ok(match tree {
        Ast::Literal(_) | Ast::Dot(_) | Ast::ClassUnicode(_) | Ast::ClassPerl(_) | Ast::ClassBracketed(_) => {
            Shape::leaf(true)
        }
        Ast::Empty(_) | Ast::Flags(_) | Ast::Assertion(_) => Shape::leaf(false),
        Ast::Group(group) => {
            let inner = walk(pattern, &group.ast)?;
            match group.kind {
                ast::GroupKind::NonCapturing(_) => inner,
                _ => Shape {
                    size: inner.size.saturating_add(2),
                    one_char: false,
                    ..inner
                },
            }
        }
        Ast::Concat(concat) => {
            let mut shape = Shape {
                size: 0,
                repeat: 1,
                one_char: false,
            };
            for item in &concat.asts {
                let item = walk(pattern, item)?;
                shape.size = shape.size.saturating_add(item.size);
                shape.repeat = shape.repeat.max(item.repeat);
            }
            // Go's check after each item, as it pushes them.
            too_large(pattern, shape.size)?;
            shape.size = shape.size.max(1);
            shape
        }
        Ast::Alternation(alternation) => {
            let mut shape = Shape {
                size: 0,
                repeat: 1,
                one_char: true,
            };
            for branch in &alternation.asts {
                let branch = walk(pattern, branch)?;
                shape.size = shape.size.saturating_add(branch.size);
                shape.repeat = shape.repeat.max(branch.repeat);
                shape.one_char &= branch.one_char;
            }
            if shape.one_char {
                shape.size = 1;
            } else {
                let bars = alternation.asts.len().saturating_sub(1) as u64;
                shape.size = shape.size.saturating_add(bars);
            }
            too_large(pattern, shape.size)?;
            shape
        }
        Ast::Repetition(repetition) => repeat(pattern, repetition)?,
    })
}

/// One repetition, after its operand: Go's checks in Go's order.
fn repeat(pattern: &str, repetition: &ast::Repetition) -> Result<Shape, String> {
    let operand = walk(pattern, &repetition.ast)?;
    let op = &repetition.op;
    let text = |span: &ast::Span| &pattern[span.start.offset..span.end.offset];
    // The braces without a non-greedy `?`, as Go names them.
    let braces = || text(&op.span).trim_end_matches('?');
    let (min, max) = match &op.kind {
        RepetitionKind::ZeroOrOne => (0, Some(1)),
        RepetitionKind::ZeroOrMore => (0, None),
        RepetitionKind::OneOrMore => (1, None),
        RepetitionKind::Range(RepetitionRange::Exactly(n)) => (u64::from(*n), Some(u64::from(*n))),
        RepetitionKind::Range(RepetitionRange::AtLeast(n)) => (u64::from(*n), None),
        RepetitionKind::Range(RepetitionRange::Bounded(m, n)) => (u64::from(*m), Some(u64::from(*n))),
    };
    let counted = matches!(op.kind, RepetitionKind::Range(_));
    if counted && (min > MAX_REPEAT || max.is_some_and(|max| max > MAX_REPEAT || min > max)) {
        return Err(go_error("invalid repeat count", braces()));
    }
    if let Ast::Repetition(inner) = &*repetition.ast {
        let both = &pattern[inner.op.span.start.offset..op.span.end.offset];
        return Err(go_error("invalid nested repetition operator", both));
    }
    // Go's nested-repetition rule applies from a count of 2; the count a path multiplies by is
    // the maximum, or the minimum when there is none.
    let count = if counted { max.unwrap_or(min) } else { 1 };
    let repeat = if count == 0 {
        1
    } else {
        count.saturating_mul(operand.repeat)
    };
    let size = match (counted, max) {
        (false, None) if min == 0 => operand.size.saturating_add(2),
        (false, _) => operand.size.saturating_add(1),
        (true, None) if min == 0 => operand.size.saturating_add(2),
        (true, None) => min.saturating_mul(operand.size).saturating_add(1),
        (true, Some(max)) => max.saturating_mul(operand.size).saturating_add(max - min),
    };
    too_large(pattern, size)?;
    if counted && (min >= 2 || max.is_some_and(|max| max >= 2)) && repeat > MAX_REPEAT {
        return Err(go_error("invalid repeat count", braces()));
    }
    Ok(Shape {
        size: size.max(1),
        repeat,
        one_char: false,
    })
}

fn too_large(pattern: &str, size: u64) -> Result<(), String> {
    if size > MAX_SIZE {
        return Err(go_error("expression too large", pattern));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::compile;

    /// Go's own verdicts (Go 1.26 `regexp.Compile`), as data.
    #[test]
    fn patterns_go_refuses_for_their_shape_are_refused_with_go_s_message() {
        let large = |p: &str| format!("error parsing regexp: expression too large: `{p}`");
        let count = |t: &str| format!("error parsing regexp: invalid repeat count: `{t}`");
        let nested = |t: &str| format!("error parsing regexp: invalid nested repetition operator: `{t}`");
        let at_279 = "(abcdefghij){1000}".repeat(279);
        let at_280 = "(abcdefghij){1000}".repeat(280);
        let cases: Vec<(&str, Option<String>)> = vec![
            ("a{1000}", None),
            ("a{1001}", Some(count("{1001}"))),
            ("a{0,1001}", Some(count("{0,1001}"))),
            ("a{2,1}", Some(count("{2,1}"))),
            ("x{2,1}?", Some(count("{2,1}"))),
            ("a{1001}?", Some(count("{1001}"))),
            ("(?i)a{1001}", Some(count("{1001}"))),
            ("a{99999999}", Some(count("{99999999}"))),
            ("a{100000000}", Some(count("{100000000}"))),
            ("a{4294967296}", Some(count("{4294967296}"))),
            ("(a{1000}){2}", Some(count("{2}"))),
            ("(a{10}){100}", None),
            ("(a{10}){101}", Some(count("{101}"))),
            ("(?:a{10}){101}", Some(count("{101}"))),
            ("((a{10}){10}){11}", Some(count("{11}"))),
            ("((a{2}){2}){251}", Some(count("{251}"))),
            ("(a{2}){500}", None),
            ("(a{1000}|b){2}", Some(count("{2}"))),
            ("(a*){1001}", Some(count("{1001}"))),
            ("((a{1000}){0}){2}", None),
            ("(x{0}){1000}", None),
            ("a{0}{1001}", Some(count("{1001}"))),
            ("(?:a{2}){500}x{1001}", Some(count("{1001}"))),
            ("a{1001}(a{1000}){2}", Some(count("{1001}"))),
            ("(?:(abcdefghij){1000}){279}", Some(count("{279}"))),
            ("(?:abcdefghij{1000}){500}", Some(count("{500}"))),
            ("a**", Some(nested("**"))),
            ("a+*", Some(nested("+*"))),
            ("a*?*", Some(nested("*?*"))),
            ("a{2}{2}", Some(nested("{2}{2}"))),
            ("a{2}*", Some(nested("{2}*"))),
            ("(a*)*", None),
            ("x{1000}y{1000}", None),
            ("(a|b){1000}", None),
            ("[a-z]{1000}", None),
            (r"\pL{1000}", None),
            (r"(?i)\pL{1000}", None),
            ("(abcdefghij){1000}", None),
            (
                "((abcdefghij){1000}x){1000}",
                Some(large("((abcdefghij){1000}x){1000}")),
            ),
            (
                "(?:(?:abcdefghij){1000}){1000}",
                Some(large("(?:(?:abcdefghij){1000}){1000}")),
            ),
            (&at_280, Some(large(&at_280))),
        ];
        for (pattern, go) in cases {
            let ours = compile(pattern).map(drop);
            assert_eq!(ours, go.clone().map_or(Ok(()), Err), "{:.80}", pattern);
        }
        // Go compiles a program of up to 3,355,443 instructions; the matcher here refuses a
        // program over 10 MiB, with its own message.
        let err = compile(&at_279).unwrap_err();
        assert!(err.ends_with("compiled regex exceeded size limit"), "{err:.80}");
    }
}
