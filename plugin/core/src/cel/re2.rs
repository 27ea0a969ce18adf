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
//! Go's Unicode classes are general categories (`\pL`, `\p{Nd}`) and scripts (`\p{Greek}`); the
//! regex crate is built with only those tables and case folding (the workspace's `regex`
//! features), so Unicode's binary properties (`\p{Alphabetic}`), ages and segmentation classes
//! are errors here as in Go, and their tables (about 160 KB) stay out of the guests.
//!
//! Syntax the regex crate accepts and Go rejects (`(?x)`, class set operations such as `&&`, the
//! word-boundary forms `\<`, `\>`, `\b{start}`, which are read as ASCII like `\b`) is not
//! rejected here: the API server compiles a selector's constant patterns with cel-go before a
//! scheduler sees them.

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
    Regex::new(&text).map_err(|e| as_written(pattern, &text, e))
}

/// The error of a rewritten pattern, named by the pattern as written: the kind of a syntax error
/// found when translating (an unknown `\p{…}` class), or the regex crate's message for the rest
/// (a size limit, which names no pattern). Compiling the pattern as written would not do: without
/// regex's `unicode-perl` tables its Unicode `\d` is itself an error.
fn as_written(pattern: &str, rewritten: &str, e: regex::Error) -> String {
    match regex_syntax::Parser::new().parse(rewritten) {
        Err(regex_syntax::Error::Translate(t)) => {
            format!("regex parse error in `{pattern}`: {}", t.kind())
        }
        _ => e.to_string(),
    }
}

/// Rewrites the Perl classes and word boundaries of `tree` into their ASCII forms; `false` when
/// there were none (the pattern compiles as written).
fn to_ascii(tree: &mut Ast) -> bool {
    match tree {
        Ast::ClassPerl(perl) => {
            *tree = Ast::class_bracketed(go_class(perl));
            true
        }
        // `\b`, `\B`, and the regex crate's `\<`, `\>`, `\b{start}`, ... (which Go lacks):
        // every assertion but the anchors.
        Ast::Assertion(a)
            if !matches!(
                a.kind,
                ast::AssertionKind::StartLine
                    | ast::AssertionKind::EndLine
                    | ast::AssertionKind::StartText
                    | ast::AssertionKind::EndText
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
    use super::compile;

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

    /// Go's `regexp` knows general categories and scripts only: Unicode's binary properties,
    /// ages and segmentation classes, and the regex crate's Unicode word-boundary forms, are
    /// errors there, so they are errors here (the regex crate is built without those tables).
    #[test]
    fn classes_go_does_not_know_are_errors() {
        for pattern in [
            r"\p{Alphabetic}",
            r"\p{White_Space}",
            r"[\p{Emoji}a]",
            r"\p{Age=3.0}",
            r"\p{Word_Break=ALetter}",
            r"\P{Grapheme_Cluster_Break=Extend}",
        ] {
            let err = compile(pattern).unwrap_err();
            assert!(err.contains(pattern), "{pattern}: {err}");
        }
        for pattern in [r"\pL", r"\p{Lu}", r"\p{Greek}", r"\PN", r"[\p{Han}\d]"] {
            assert!(compile(pattern).is_ok(), "{pattern}");
        }
        // The regex crate's word-boundary forms, which Go lacks, are read as ASCII like `\b`.
        for (pattern, text, want) in [
            (r"\<b", "éb", true),
            (r"\<b", "ab", false),
            (r"a\>", "aé", true),
            (r"\b{start}b", "éb", true),
            (r"a\b{end-half}", "aé", true),
        ] {
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

    /// The rewrite means on ASCII text what Go means: every pattern of up to three fragments
    /// agrees, on ASCII text, with the regex crate's ASCII mode (Unicode off, on bytes: ASCII
    /// Perl classes and word boundaries, as Go's), and compiles exactly when the ASCII mode
    /// compiles it, but for the patterns that only Unicode mode reads (`\pL`, `é`) or only
    /// ASCII mode reads (`(?-u)` before an item that may match a non-UTF-8 byte).
    #[test]
    fn the_rewrite_means_on_ascii_text_what_go_means() {
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
                    let ascii = regex::bytes::RegexBuilder::new(&pattern).unicode(false).build();
                    match (compile(&pattern), ascii) {
                        (Ok(ours), Ok(ascii)) => {
                            compiled += 1;
                            for text in texts {
                                assert_eq!(
                                    ours.is_match(text),
                                    ascii.is_match(text.as_bytes()),
                                    "{pattern:?} on {text:?}"
                                );
                            }
                        }
                        (Err(_), Err(_)) => {}
                        (Ok(_), Err(_)) if pattern.contains(r"\pL") || !pattern.is_ascii() => {}
                        (Err(_), Ok(_)) if pattern.contains("(?-u)") => {}
                        (ours, ascii) => panic!("{pattern:?}: {ours:?} but in ASCII mode {ascii:?}"),
                    }
                }
            }
        }
        assert!(compiled > 3_000, "{compiled}");
    }
}
