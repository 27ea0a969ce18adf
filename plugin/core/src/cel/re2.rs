//! Regular expressions as Kubernetes CEL's `matches()` reads them: Go's `regexp` (RE2 syntax).
//!
//! The regex crate reads the same syntax and runs it in linear time, but its Perl classes and
//! word boundaries follow Unicode where Go's are ASCII: in Go, `\d` is `[0-9]`, `\w` is
//! `[0-9A-Za-z_]`, `\s` is `[\t\n\f\r ]` (no `\v`), and `\b`/`\B` look at ASCII word characters
//! only. A selector `matches("^\\d+$")` on an attribute written in Arabic-Indic digits is false
//! in the Kubernetes scheduler, so it must be false here. The pattern is parsed, those items are
//! rewritten into the ASCII classes and `(?-u:\b)` assertions that mean the same as Go's, and the
//! result is compiled. Everything else (Unicode classes such as `\pL`, case folding under `(?i)`,
//! POSIX classes, which are ASCII in both) already agrees.
//!
//! Syntax the regex crate accepts and Go rejects (`(?x)`, class set operations such as `&&`) is
//! not rejected here: the API server compiles a selector's constant patterns with cel-go before
//! a scheduler sees them.

use regex::Regex;
use regex_syntax::ast::{
    self, Ast, ClassBracketed, ClassPerl, ClassPerlKind, ClassSet, ClassSetItem, ClassSetRange,
    ClassSetUnion, Flag, Flags, FlagsItem, FlagsItemKind, Group, GroupKind, HexLiteralKind, Literal,
    LiteralKind,
};

/// Compiles `pattern` with Go's meaning of `\d`, `\s`, `\w`, `\b` and `\B`; the error is the
/// regex crate's message for the pattern as written.
pub(crate) fn compile(pattern: &str) -> Result<Regex, String> {
    let mut tree = ast::parse::Parser::new()
        .parse(pattern)
        .map_err(|e| regex_syntax::Error::from(e).to_string())?;
    if !to_ascii(&mut tree) {
        return Regex::new(pattern).map_err(|e| e.to_string());
    }
    let mut text = String::with_capacity(pattern.len() + 32);
    ast::print::Printer::new()
        .print(&tree, &mut text)
        .map_err(|e| e.to_string())?;
    Regex::new(&text).map_err(|e| match Regex::new(pattern) {
        // Name the pattern as written, not its rewrite (an unknown `\p{…}` class, a size limit).
        Err(as_written) => as_written.to_string(),
        Ok(_) => e.to_string(),
    })
}

/// Rewrites the Perl classes and word boundaries of `tree` into their ASCII forms; `false` when
/// there were none (the pattern compiles as written).
fn to_ascii(tree: &mut Ast) -> bool {
    match tree {
        Ast::ClassPerl(perl) => {
            *tree = Ast::class_bracketed(go_class(perl));
            true
        }
        Ast::Assertion(a)
            if matches!(
                a.kind,
                ast::AssertionKind::WordBoundary | ast::AssertionKind::NotWordBoundary
            ) =>
        {
            let span = a.span;
            let assertion = std::mem::replace(tree, Ast::empty(span));
            let item = |kind| FlagsItem { span, kind };
            *tree = Ast::group(Group {
                span,
                kind: GroupKind::NonCapturing(Flags {
                    span,
                    items: vec![
                        item(FlagsItemKind::Negation),
                        item(FlagsItemKind::Flag(Flag::Unicode)),
                    ],
                }),
                ast: Box::new(assertion),
            });
            true
        }
        Ast::ClassBracketed(class) => set_to_ascii(&mut class.kind),
        Ast::Repetition(r) => to_ascii(&mut r.ast),
        Ast::Group(g) => to_ascii(&mut g.ast),
        Ast::Alternation(a) => a.asts.iter_mut().fold(false, |any, t| to_ascii(t) | any),
        Ast::Concat(c) => c.asts.iter_mut().fold(false, |any, t| to_ascii(t) | any),
        Ast::Empty(_)
        | Ast::Flags(_)
        | Ast::Literal(_)
        | Ast::Dot(_)
        | Ast::Assertion(_)
        | Ast::ClassUnicode(_) => false,
    }
}

fn set_to_ascii(set: &mut ClassSet) -> bool {
    match set {
        ClassSet::Item(item) => item_to_ascii(item),
        ClassSet::BinaryOp(op) => set_to_ascii(&mut op.lhs) | set_to_ascii(&mut op.rhs),
    }
}

fn item_to_ascii(item: &mut ClassSetItem) -> bool {
    match item {
        ClassSetItem::Perl(perl) => {
            *item = ClassSetItem::Bracketed(Box::new(go_class(perl)));
            true
        }
        ClassSetItem::Bracketed(class) => set_to_ascii(&mut class.kind),
        ClassSetItem::Union(u) => u.items.iter_mut().fold(false, |any, i| item_to_ascii(i) | any),
        ClassSetItem::Empty(_)
        | ClassSetItem::Literal(_)
        | ClassSetItem::Range(_)
        | ClassSetItem::Ascii(_)
        | ClassSetItem::Unicode(_) => false,
    }
}

/// Go's meaning of a Perl class, as a bracketed class of hex-escaped ranges (escaped so that
/// `(?x)` cannot drop a space).
fn go_class(perl: &ClassPerl) -> ClassBracketed {
    let span = perl.span;
    let ranges: &[(char, char)] = match perl.kind {
        ClassPerlKind::Digit => &[('0', '9')],
        ClassPerlKind::Word => &[('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')],
        ClassPerlKind::Space => &[('\t', '\n'), ('\x0c', '\r'), (' ', ' ')],
    };
    let literal = |c| Literal {
        span,
        kind: LiteralKind::HexFixed(HexLiteralKind::X),
        c,
    };
    let items = ranges
        .iter()
        .map(|&(start, end)| {
            if start == end {
                ClassSetItem::Literal(literal(start))
            } else {
                ClassSetItem::Range(ClassSetRange {
                    span,
                    start: literal(start),
                    end: literal(end),
                })
            }
        })
        .collect();
    ClassBracketed {
        span,
        negated: perl.negated,
        kind: ClassSet::union(ClassSetUnion { span, items }),
    }
}

#[cfg(test)]
mod tests {
    use super::{Regex, compile};

    /// Go's answers (`regexp.MatchString`) for patterns whose Perl classes and word boundaries
    /// meet non-ASCII text, and for the items that already agree.
    #[test]
    fn perl_classes_and_word_boundaries_are_ascii_as_in_go() {
        let cases: &[(&str, &str, bool)] = &[
            (r"^\d+$", "0123456789", true),
            (r"^\d+$", "٣٤", false), // Arabic-Indic digits
            (r"^\D$", "٣", true),
            (r"^\w+$", "abc_XYZ_09", true),
            (r"^\w+$", "héllo", false),
            (r"^\W$", "é", true),
            (r"^\s$", "\u{a0}", false), // no-break space
            (r"^\s$", "\u{b}", false),  // vertical tab: not in Go's \s
            (r"^\s+$", "\t\n\u{c}\r ", true),
            (r"^\S$", "\u{2003}", true),
            (r"^[\d\s]+$", "1 2\t3", true),
            (r"^[\d]+$", "١", false),
            (r"^[^\d]$", "١", true),
            (r"^[\W]$", "ß", true),
            (r"^[a[:digit:]\w-]+$", "a-1_b", true),
            (r"\bb", "éb", true), // é is not an ASCII word character
            (r"\Bb", "éb", false),
            (r"\Bb", "ab", true),
            (r"^(?:x|\d{2})$", "٢٢", false),
            (r"^(\d)+$", "12", true),
            // Already the same in both.
            (r"^\pL+$", "héllo", true),
            (r"^\p{Greek}$", "λ", true),
            (r"(?i)^straße$", "STRASSE", false),
            (r"(?i)^k$", "\u{212a}", true), // Kelvin sign folds to k in Go too
            (r"^[[:alpha:]]$", "é", false),
            (r"^.$", "é", true),
            (r"(?x) ^ \d \s $", "1 ", true),
        ];
        for &(pattern, text, want) in cases {
            let regex = compile(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            assert_eq!(regex.is_match(text), want, "{pattern:?} on {text:?}");
        }
    }

    #[test]
    fn a_bad_pattern_is_reported_as_written() {
        let err = compile(r"(\d").unwrap_err();
        assert!(err.contains(r"(\d") && err.contains("unclosed group"), "{err}");
        assert!(
            compile("[z-a]")
                .unwrap_err()
                .contains("invalid character class range")
        );
        // Found when translating, after the rewrite: still the pattern as written.
        let err = compile(r"\d\p{NoSuchClass}").unwrap_err();
        assert!(
            err.contains(r"\d\p{NoSuchClass}") && err.contains("Unicode"),
            "{err}"
        );
    }

    /// The rewrite changes nothing else: every pattern of up to three fragments compiles with it
    /// exactly when it compiles as written, and both agree on ASCII text (without `\v`, the one
    /// ASCII character where Go's `\s` and Unicode's differ).
    #[test]
    fn the_rewrite_agrees_with_the_pattern_as_written_on_ascii_text() {
        let fragments = [
            "a",
            "Z",
            r"\d",
            r"\D",
            r"\w",
            r"\W",
            r"\s",
            r"\S",
            r"\b",
            r"\B",
            r"[\d_]",
            r"[^\w-]",
            r"[a[\s]]",
            r"[\w&&[^\d]]",
            "(?i)",
            "(?x)",
            "(?-u)",
            "(",
            ")",
            "|",
            "*",
            "{2}",
            "^",
            "$",
            ".",
            "[",
            "]",
            r"\pL",
            "é",
            "[[:alpha:]]",
            r"\",
        ];
        let texts = [
            "",
            "a",
            "ab1_",
            "a b",
            "A\tZ",
            "x-y",
            "9",
            "__",
            " a ",
            "Q\r\n\u{c}z",
            "aZ9",
        ];
        let mut compiled = 0;
        for a in fragments {
            for b in fragments {
                for c in ["", "a", r"\d", r"\b", ")", "+"] {
                    let pattern = format!("{a}{b}{c}");
                    match (compile(&pattern), Regex::new(&pattern)) {
                        (Ok(go), Ok(unicode)) => {
                            compiled += 1;
                            for text in texts {
                                assert_eq!(
                                    go.is_match(text),
                                    unicode.is_match(text),
                                    "{pattern:?} on {text:?}"
                                );
                            }
                        }
                        (Err(_), Err(_)) => {}
                        (go, unicode) => panic!("{pattern:?}: {go:?} but as written {unicode:?}"),
                    }
                }
            }
        }
        assert!(compiled > 3_000, "{compiled}");
    }
}
