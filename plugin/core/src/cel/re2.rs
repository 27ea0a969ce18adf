//! Regular expressions as Kubernetes CEL's `matches()` reads them: Go's `regexp` (RE2 syntax).
//!
//! `regex-syntax` parses Go's syntax, but the regex crate's Perl classes follow Unicode where
//! Go's are ASCII: in Go, `\d` is `[0-9]`, `\w` is `[0-9A-Za-z_]`, `\s` is `[\t\n\f\r ]` (no
//! `\v`), and `\b`/`\B` look at ASCII word characters only. A selector `matches("^\\d+$")` on an
//! attribute written in Arabic-Indic digits is false in the Kubernetes scheduler, so it must be
//! false here. So the pattern is parsed, its Perl classes rewritten into Go's ASCII classes, and
//! the tree translated (`regex-syntax`'s translator: Unicode classes such as `\pL` and case
//! folding under `(?i)` resolved into explicit code point ranges, as Go resolves them; POSIX
//! classes, ASCII in both). The translation is written out for `regex-lite`, which matches it:
//! every class as its ranges, every character outside `[0-9A-Za-z]` as a `\x{…}` escape, every
//! word boundary as `regex-lite`'s, which is ASCII as Go's is. `regex-lite` is a PikeVM (linear
//! in the text, like Go's `regexp`) a fraction of the size of the regex crate's engines; it knows
//! no Unicode classes itself, and needs none: the translator has resolved them.
//!
//! Go's Unicode classes are general categories (`\pL`, `\p{Nd}`) and scripts (`\p{Greek}`);
//! `regex-syntax` is built with only those tables and case folding (the workspace's features),
//! so Unicode's binary properties (`\p{Alphabetic}`), ages and segmentation classes are errors
//! here as in Go, and their tables (about 160 KB) stay out of the guests.
//!
//! Syntax `regex-syntax` accepts and Go rejects (`(?x)`, class set operations such as `&&`, the
//! word-boundary forms `\<`, `\>`, `\b{start}`, which are read as ASCII like `\b`) is not
//! rejected here: the API server compiles a selector's constant patterns with cel-go before a
//! scheduler sees them.

use std::fmt::Write as _;

use regex_lite::Regex;
use regex_syntax::ast::{
    self, Ast, ClassBracketed, ClassPerl, ClassPerlKind, ClassSet, ClassSetItem, ClassSetRange,
    ClassSetUnion, HexLiteralKind, Literal, LiteralKind,
};
use regex_syntax::hir::{Class, Hir, HirKind, Look, translate::Translator};

/// How deep `regex-lite` may nest the expression [`compile`] writes for it. The written
/// expression nests no deeper than the pattern's syntax tree, which `regex-syntax`'s parser
/// bounds first (250, as the regex crate's); the margin is for the groups that writing adds.
const LITE_NEST_LIMIT: u32 = 512;

/// Compiles `pattern` with Go's meaning of `\d`, `\s`, `\w`, `\b` and `\B`.
///
/// The pattern is parsed and translated by `regex-syntax` (Go's syntax, Unicode classes and
/// case folding resolved into explicit code point ranges) and matched by `regex-lite`, which
/// is given the translated expression written out with nothing left to interpret: every class
/// as its ranges, every assertion in its ASCII form. An error names the pattern as written.
pub(crate) fn compile(pattern: &str) -> Result<Regex, String> {
    let mut tree = ast::parse::Parser::new()
        .parse(pattern)
        .map_err(|e| regex_syntax::Error::from(e).to_string())?;
    to_ascii(&mut tree);
    let hir = Translator::new()
        .translate(pattern, &tree)
        .map_err(|e| regex_syntax::Error::from(e).to_string())?;
    let mut text = String::with_capacity(pattern.len() * 2 + 16);
    write_hir(&hir, Prec::Alternation, &mut text);
    regex_lite::RegexBuilder::new(&text)
        .nest_limit(LITE_NEST_LIMIT)
        .build()
        .map_err(|e| format!("regex `{pattern}`: {e}"))
}

/// How tightly an expression binds in the written pattern: a part is grouped when its context
/// needs it to bind tighter than it does.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    /// `a|b`
    Alternation,
    /// `ab`
    Concat,
    /// `a*`
    Repetition,
    /// one item: a character, a class, an assertion, a group
    Atom,
}

/// Writes `hir` in the syntax `regex-lite` reads, grouped where `context` needs it. Captures
/// are written as their contents (only whether the pattern matches is asked).
fn write_hir(hir: &Hir, context: Prec, out: &mut String) {
    let own = match hir.kind() {
        HirKind::Alternation(_) => Prec::Alternation,
        HirKind::Concat(_) => Prec::Concat,
        HirKind::Empty => Prec::Concat,
        HirKind::Literal(lit) if String::from_utf8_lossy(&lit.0).chars().nth(1).is_some() => Prec::Concat,
        HirKind::Repetition(_) | HirKind::Look(_) => Prec::Repetition,
        HirKind::Capture(c) => return write_hir(&c.sub, context, out),
        HirKind::Literal(_) | HirKind::Class(_) => Prec::Atom,
    };
    let group = own < context;
    if group {
        out.push_str("(?:");
    }
    match hir.kind() {
        HirKind::Empty | HirKind::Capture(_) => {}
        HirKind::Literal(lit) => {
            // The translator's literals are UTF-8: `Translator` refuses patterns that could
            // match invalid UTF-8, as the regex crate's `Regex` does.
            for c in String::from_utf8_lossy(&lit.0).chars() {
                write_char(c, out);
            }
        }
        HirKind::Class(Class::Unicode(class)) => {
            let ranges = class.iter().map(|r| (r.start(), r.end()));
            write_class(ranges, out);
        }
        HirKind::Class(Class::Bytes(class)) => {
            // Only under `(?-u)`, and ASCII: the translator refuses a byte class that could
            // match a byte of a multi-byte character.
            let ranges = class.iter().map(|r| (char::from(r.start()), char::from(r.end())));
            write_class(ranges, out);
        }
        HirKind::Look(look) => out.push_str(look_text(*look)),
        HirKind::Repetition(rep) => {
            write_hir(&rep.sub, Prec::Atom, out);
            match (rep.min, rep.max) {
                (0, None) => out.push('*'),
                (1, None) => out.push('+'),
                (0, Some(1)) => out.push('?'),
                (min, None) => {
                    let _ = write!(out, "{{{min},}}");
                }
                (min, Some(max)) if min == max => {
                    let _ = write!(out, "{{{min}}}");
                }
                (min, Some(max)) => {
                    let _ = write!(out, "{{{min},{max}}}");
                }
            }
            if !rep.greedy {
                out.push('?');
            }
        }
        HirKind::Concat(parts) => {
            for part in parts {
                write_hir(part, Prec::Concat, out);
            }
        }
        HirKind::Alternation(parts) => {
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    out.push('|');
                }
                write_hir(part, Prec::Concat, out);
            }
        }
    }
    if group {
        out.push(')');
    }
}

/// A character as itself when it is an ASCII letter or digit, else as `\x{…}` (which no flag
/// of the written pattern can reinterpret).
fn write_char(c: char, out: &mut String) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:x}}}", u32::from(c));
    }
}

/// A class as its ranges; the empty class as one that matches nothing.
fn write_class(ranges: impl Iterator<Item = (char, char)>, out: &mut String) {
    let start = out.len();
    out.push('[');
    for (first, last) in ranges {
        write_char(first, out);
        if last != first {
            out.push('-');
            write_char(last, out);
        }
    }
    if out.len() == start + 1 {
        out.push_str("^\\x{0}-\\x{10ffff}");
    }
    out.push(']');
}

/// An assertion in `regex-lite`'s syntax. Its word boundaries are ASCII, as Go's `\b` and `\B`
/// are, so the translator's Unicode word boundaries (Unicode mode is on) are written as them;
/// the regex crate's other forms (`\<`, `\b{start}`, ...), which Go lacks, are read the same way.
fn look_text(look: Look) -> &'static str {
    match look {
        Look::Start => "\\A",
        Look::End => "\\z",
        Look::StartLF => "(?m:^)",
        Look::EndLF => "(?m:$)",
        Look::StartCRLF => "(?mR:^)",
        Look::EndCRLF => "(?mR:$)",
        Look::WordAscii | Look::WordUnicode => "\\b",
        Look::WordAsciiNegate | Look::WordUnicodeNegate => "\\B",
        Look::WordStartAscii | Look::WordStartUnicode => "\\b{start}",
        Look::WordEndAscii | Look::WordEndUnicode => "\\b{end}",
        Look::WordStartHalfAscii | Look::WordStartHalfUnicode => "\\b{start-half}",
        Look::WordEndHalfAscii | Look::WordEndHalfUnicode => "\\b{end-half}",
    }
}

/// Rewrites the Perl classes of `tree` (`\\d`, `\\s`, `\\w` and their negations, alone or in
/// brackets) into Go's ASCII classes. Word boundaries need no rewrite: they are written out as
/// `regex-lite`'s, which are ASCII (see [`look_text`]).
pub(super) fn to_ascii(tree: &mut Ast) {
    match tree {
        Ast::ClassPerl(perl) => *tree = Ast::class_bracketed(go_class(perl)),
        Ast::ClassBracketed(class) => set_to_ascii(&mut class.kind),
        Ast::Repetition(r) => to_ascii(&mut r.ast),
        Ast::Group(g) => to_ascii(&mut g.ast),
        Ast::Alternation(a) => a.asts.iter_mut().for_each(to_ascii),
        Ast::Concat(c) => c.asts.iter_mut().for_each(to_ascii),
        Ast::Empty(_)
        | Ast::Flags(_)
        | Ast::Literal(_)
        | Ast::Dot(_)
        | Ast::Assertion(_)
        | Ast::ClassUnicode(_) => {}
    }
}

fn set_to_ascii(set: &mut ClassSet) {
    match set {
        ClassSet::Item(item) => item_to_ascii(item),
        ClassSet::BinaryOp(op) => {
            set_to_ascii(&mut op.lhs);
            set_to_ascii(&mut op.rhs);
        }
    }
}

fn item_to_ascii(item: &mut ClassSetItem) {
    match item {
        ClassSetItem::Perl(perl) => *item = ClassSetItem::Bracketed(Box::new(go_class(perl))),
        ClassSetItem::Bracketed(class) => set_to_ascii(&mut class.kind),
        ClassSetItem::Union(u) => u.items.iter_mut().for_each(item_to_ascii),
        ClassSetItem::Empty(_)
        | ClassSetItem::Literal(_)
        | ClassSetItem::Range(_)
        | ClassSetItem::Ascii(_)
        | ClassSetItem::Unicode(_) => {}
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
        // What could match a byte of a multi-byte character is refused, as Go's `regexp` works
        // on characters: no byte class or literal above ASCII reaches `write_hir`.
        for pattern in [r"(?-u:[\x80-\xFF])", r"(?-u:\xFF)", r"(?-u:[^a])"] {
            let err = compile(pattern).unwrap_err();
            assert!(err.contains("invalid UTF-8"), "{pattern}: {err}");
        }
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

    /// Patterns nested as deep as `regex-syntax`'s parser admits (250) compile; one level more is
    /// an error that names the pattern, as in the regex crate.
    #[test]
    fn nesting_up_to_the_parser_limit_compiles() {
        for depth in [1, 50, 120, 249, 250, 251, 400] {
            let groups = format!("{}a{}", "(".repeat(depth), ")".repeat(depth));
            let repeated = format!("{}a{}", "(?:b".repeat(depth), ")*".repeat(depth));
            let alternated = format!("{}a{}", "(?:b|".repeat(depth), ")+?".repeat(depth));
            for pattern in [groups, repeated, alternated] {
                let oracle = regex::Regex::new(&pattern);
                match compile(&pattern) {
                    Ok(ours) => {
                        let oracle = oracle.unwrap_or_else(|e| panic!("depth {depth}: {e}"));
                        for text in ["a", "ba", "bbb", "x"] {
                            assert_eq!(ours.is_match(text), oracle.is_match(text), "{depth} {text}");
                        }
                    }
                    Err(e) => {
                        assert!(oracle.is_err(), "depth {depth}: ours fails: {e}");
                        assert!(e.contains("nest"), "{e}");
                    }
                }
            }
        }
        // Within a quarter of the guest's 1 MiB stack: regex-lite's parser recurses per group.
        let deepest = format!("{}a{}", "(".repeat(249), ")".repeat(249));
        let on_small_stack = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || compile(&deepest).is_ok_and(|r| r.is_match("a")))
            .and_then(|t| t.join().map_err(|_| std::io::Error::other("panicked")));
        assert!(on_small_stack.is_ok_and(|ok| ok));
    }
}
