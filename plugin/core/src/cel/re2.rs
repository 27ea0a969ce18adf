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
//! Go's Unicode classes (`\pL`, `\p{Greek}`) and case folding under `(?i)` are resolved here,
//! before the translator sees the tree, from the core's own tables ([`super::unicode`]): each
//! class becomes its explicit ranges, and under `(?i)` each literal and each item of a class
//! gains its case-folding orbit, after which the `i` flags are dropped. `regex-syntax` is built
//! without its Unicode tables, which hold much Go never reads (binary properties, ages,
//! segmentation classes, script extensions, property aliases): `\p{Alphabetic}` is an error here
//! as in Go. Go's regexp has no `u` flag, and a `(?-u)` is refused as Go refuses it.
//!
//! Syntax `regex-syntax` accepts and Go rejects (`(?x)`, class set operations such as `&&`, the
//! word-boundary forms `\<`, `\>`, `\b{start}`, which are read as ASCII like `\b`) is not
//! rejected here: the API server compiles a selector's constant patterns with cel-go before a
//! scheduler sees them. The limits Go puts on a pattern's shape (counts, nesting of counts,
//! program size) are checked, with Go's messages ([`limits`]).

use std::fmt::Write as _;

use regex_lite::Regex;
use regex_syntax::ast::{
    self, Ast, ClassBracketed, ClassPerl, ClassPerlKind, ClassSet, ClassSetItem, ClassSetRange,
    ClassSetUnion, ClassUnicodeKind, Flag, FlagsItemKind, GroupKind, HexLiteralKind, Literal, LiteralKind,
    Span,
};
use regex_syntax::hir::{Class, Hir, HirKind, Look, translate::Translator};

use super::unicode;

mod limits;

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
    let hir = translate(pattern)?;
    let mut text = String::with_capacity(pattern.len() * 2 + 16);
    write_hir(&hir, Prec::Alternation, &mut text);
    regex_lite::RegexBuilder::new(&text)
        .nest_limit(LITE_NEST_LIMIT)
        .build()
        .map_err(|e| format!("regex `{pattern}`: {e}"))
}

/// `pattern` parsed, its Perl classes made Go's, its Unicode classes and case folding resolved,
/// and translated.
fn translate(pattern: &str) -> Result<Hir, String> {
    let mut tree = ast::parse::Parser::new()
        .parse(pattern)
        .map_err(|e| limits::parse_error(pattern, e))?;
    limits::check(pattern, &tree)?;
    to_ascii(&mut tree);
    Resolve { pattern, fold: false }.ast(&mut tree)?;
    Translator::new()
        .translate(pattern, &tree)
        .map_err(|e| regex_syntax::Error::from(e).to_string())
}

/// Resolves what the translator would need Unicode tables for: Unicode classes become bracketed
/// classes of their ranges, and where `(?i)` is on, literals become classes of their case-folding
/// orbits and class items gain theirs; the `i` flags are then dropped. Flags are scoped as the
/// translator (and Go) scope them: a group restores the flags it started with, and a flag set
/// inside a group holds to the group's end, across `|`.
struct Resolve<'a> {
    pattern: &'a str,
    /// Whether `(?i)` is on where the walk is.
    fold: bool,
}

impl Resolve<'_> {
    fn ast(&mut self, tree: &mut Ast) -> Result<(), String> {
        match tree {
            Ast::Flags(set) => self.flags(&mut set.flags)?,
            Ast::Group(group) => {
                let outer = self.fold;
                if let GroupKind::NonCapturing(flags) = &mut group.kind {
                    self.flags(flags)?;
                }
                self.ast(&mut group.ast)?;
                self.fold = outer;
            }
            Ast::Alternation(a) => a.asts.iter_mut().try_for_each(|t| self.ast(t))?,
            Ast::Concat(c) => c.asts.iter_mut().try_for_each(|t| self.ast(t))?,
            Ast::Repetition(r) => self.ast(&mut r.ast)?,
            Ast::Literal(lit) if self.fold => {
                let c = u32::from(lit.c);
                let mut members: Vec<u32> = unicode::orbit(c).collect();
                if !members.is_empty() {
                    members.push(c);
                    let span = lit.span;
                    let items = members.into_iter().map(|m| ranges_item(span, m, m)).collect();
                    *tree = Ast::class_bracketed(bracketed(span, false, items));
                }
            }
            Ast::ClassUnicode(class) => *tree = Ast::class_bracketed(self.unicode(class)?),
            Ast::ClassBracketed(class) => self.set(&mut class.kind)?,
            Ast::Literal(_) | Ast::Empty(_) | Ast::Dot(_) | Ast::Assertion(_) | Ast::ClassPerl(_) => {}
        }
        Ok(())
    }

    /// Applies a flag set to the walk and drops its `i` flags; a `u` flag is an error.
    fn flags(&mut self, flags: &mut ast::Flags) -> Result<(), String> {
        let mut enable = true;
        for item in &flags.items {
            match item.kind {
                FlagsItemKind::Negation => enable = false,
                FlagsItemKind::Flag(Flag::CaseInsensitive) => self.fold = enable,
                FlagsItemKind::Flag(Flag::Unicode) => {
                    return Err(format!(
                        "regex `{}`: invalid or unsupported Perl syntax: flag `u` \
                         (Go's regexp has the flags i, m, s and U)",
                        self.pattern
                    ));
                }
                FlagsItemKind::Flag(_) => {}
            }
        }
        flags
            .items
            .retain(|item| item.kind != FlagsItemKind::Flag(Flag::CaseInsensitive));
        Ok(())
    }

    fn set(&mut self, set: &mut ClassSet) -> Result<(), String> {
        match set {
            ClassSet::Item(item) => self.item(item),
            ClassSet::BinaryOp(op) => {
                self.set(&mut op.lhs)?;
                self.set(&mut op.rhs)
            }
        }
    }

    /// Resolves one item of a bracketed class. Under `(?i)` each item is folded on its own
    /// before set operations and negations apply, as the translator folds them.
    fn item(&mut self, item: &mut ClassSetItem) -> Result<(), String> {
        let ranges = match item {
            ClassSetItem::Unicode(class) => {
                *item = ClassSetItem::Bracketed(Box::new(self.unicode(class)?));
                return Ok(());
            }
            ClassSetItem::Bracketed(class) => return self.set(&mut class.kind),
            ClassSetItem::Union(union) => {
                return union.items.iter_mut().try_for_each(|i| self.item(i));
            }
            _ if !self.fold => return Ok(()),
            ClassSetItem::Literal(lit) => vec![(u32::from(lit.c), u32::from(lit.c))],
            ClassSetItem::Range(range) => vec![(u32::from(range.start.c), u32::from(range.end.c))],
            ClassSetItem::Ascii(class) => {
                // Folded, then negated: `[[:^alpha:]]` is what `[[:alpha:]]` folded leaves.
                let (span, negated) = (class.span, class.negated);
                let mut plain = class.clone();
                plain.negated = false;
                let items = vec![ClassSetItem::Ascii(plain)];
                let alone = Ast::class_bracketed(bracketed(span, false, items.clone()));
                let translated = Translator::new().translate(self.pattern, &alone);
                let ranges: Vec<(u32, u32)> = match translated.map(Hir::into_kind) {
                    Ok(HirKind::Class(Class::Unicode(class))) => class
                        .iter()
                        .map(|r| (u32::from(r.start()), u32::from(r.end())))
                        .collect(),
                    _ => {
                        return Err(format!(
                            "regex `{}`: a POSIX class did not translate to a class",
                            self.pattern
                        ));
                    }
                };
                let mut items = items;
                items.extend(
                    unicode::folded_extra(&ranges)
                        .into_iter()
                        .map(|c| ranges_item(span, c, c)),
                );
                *item = ClassSetItem::Bracketed(Box::new(bracketed(span, negated, items)));
                return Ok(());
            }
            ClassSetItem::Empty(_) | ClassSetItem::Perl(_) => return Ok(()),
        };
        let extra = unicode::folded_extra(&ranges);
        if !extra.is_empty() {
            let span = *item.span();
            let mut items = vec![std::mem::replace(item, ClassSetItem::Empty(span))];
            items.extend(extra.into_iter().map(|c| ranges_item(span, c, c)));
            *item = ClassSetItem::Union(ClassSetUnion { span, items });
        }
        Ok(())
    }

    /// A Unicode class as the bracketed class of its ranges, folded under `(?i)`.
    fn unicode(&self, class: &ast::ClassUnicode) -> Result<ClassBracketed, String> {
        let named = go_class_name(class).ok_or_else(|| {
            format!(
                "regex `{}`: unknown Unicode class `{}` (Go's regexp knows general categories, \
                 scripts, Any, ASCII and Assigned)",
                self.pattern,
                &self.pattern[class.span.start.offset..class.span.end.offset]
            )
        })?;
        let ranges = named.ranges();
        let extra = if self.fold {
            unicode::folded_extra(&ranges)
        } else {
            Vec::new()
        };
        let span = class.span;
        let items = ranges
            .into_iter()
            .chain(extra.into_iter().map(|c| (c, c)))
            .map(|(start, end)| ranges_item(span, start, end))
            .collect();
        Ok(bracketed(span, class.negated != named.negated, items))
    }
}

/// What Go's lookup makes of a Unicode class's name (`\pL`, `\p{Greek}`); a `key=value` form
/// names nothing Go knows.
pub(super) fn go_class_name(class: &ast::ClassUnicode) -> Option<unicode::Named> {
    match &class.kind {
        ClassUnicodeKind::OneLetter(letter) => unicode::lookup(letter.encode_utf8(&mut [0; 4])),
        ClassUnicodeKind::Named(name) => unicode::lookup(name),
        ClassUnicodeKind::NamedValue { .. } => None,
    }
}

/// A bracketed class of `items`.
fn bracketed(span: Span, negated: bool, items: Vec<ClassSetItem>) -> ClassBracketed {
    ClassBracketed {
        span,
        negated,
        kind: ClassSet::union(ClassSetUnion { span, items }),
    }
}

/// The class item of the characters from `start` to `end`, surrogates left out (no character
/// is one; a range may span them).
fn ranges_item(span: Span, start: u32, end: u32) -> ClassSetItem {
    let surrogate = |c: u32| (0xd800..=0xdfff).contains(&c);
    let start = if surrogate(start) { 0xe000 } else { start };
    let end = if surrogate(end) { 0xd7ff } else { end };
    let literal = |c| Literal {
        span,
        kind: LiteralKind::HexBrace(HexLiteralKind::X),
        c,
    };
    match (char::from_u32(start), char::from_u32(end)) {
        (Some(first), Some(last)) if first == last => ClassSetItem::Literal(literal(first)),
        (Some(first), Some(last)) if first < last => ClassSetItem::Range(ClassSetRange {
            span,
            start: literal(first),
            end: literal(last),
        }),
        // Surrogates only.
        _ => ClassSetItem::Empty(span),
    }
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

    /// Each pattern compiles and matches its text exactly when Go's `regexp.MatchString` does.
    fn answers_as_go(cases: &[(&str, &str, bool)]) {
        for &(pattern, text, want) in cases {
            let regex = compile(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            assert_eq!(regex.is_match(text), want, "{pattern:?} on {text:?}");
        }
    }

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
        answers_as_go(cases);
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
        answers_as_go(&[
            (r"\<b", "éb", true),
            (r"\<b", "ab", false),
            (r"a\>", "aé", true),
            (r"\b{start}b", "éb", true),
            (r"a\b{end-half}", "aé", true),
        ]);
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
        // Go's regexp has no `u` flag: `(?-u)`, which could match a byte of a multi-byte
        // character, is refused.
        for pattern in [
            r"(?-u:[\x80-\xFF])",
            r"(?-u:\xFF)",
            r"(?-u:[^a])",
            "a(?u)b",
            "(?i-u)",
        ] {
            let err = compile(pattern).unwrap_err();
            assert!(
                err.contains(pattern) && err.contains("flag `u`"),
                "{pattern}: {err}"
            );
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
    /// compiles it, but for the patterns that only Unicode mode reads (`\pL`, `é`), that only
    /// ASCII mode reads (`(?-u)` before an item that may match a non-UTF-8 byte) or that Go
    /// refuses for their shape ([`limits`]).
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
                        // Go refuses an operator right after another (`a*+`); the regex crate
                        // repeats the repetition.
                        (Err(e), Ok(_)) if e.contains("invalid nested repetition operator") => {}
                        (ours, ascii) => panic!("{pattern:?}: {ours:?} but in ASCII mode {ascii:?}"),
                    }
                }
            }
        }
        assert!(compiled > 3_000, "{compiled}");
    }

    /// The translation written out, with the Unicode classes and case folding resolved from
    /// the core's tables, is the one `regex-syntax` makes from its own tables (which the tests
    /// build it with, and the guests do not): every class name Go knows, alone, in brackets,
    /// negated, under `(?i)` or not, and `(?i)` scoped by groups, flags and alternation over
    /// literals, ranges, POSIX and Perl classes and set operations.
    #[test]
    fn classes_and_folding_resolve_as_regex_syntax_s_tables_resolve_them() {
        fn with_tables(pattern: &str) -> String {
            let mut tree = regex_syntax::ast::parse::Parser::new()
                .parse(pattern)
                .expect("parses");
            super::to_ascii(&mut tree);
            let hir = regex_syntax::hir::translate::Translator::new()
                .translate(pattern, &tree)
                .unwrap_or_else(|e| panic!("{pattern}: {e}"));
            let mut text = String::new();
            super::write_hir(&hir, super::Prec::Alternation, &mut text);
            text
        }
        let ours = |pattern: &str| {
            let hir = super::translate(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            let mut text = String::new();
            super::write_hir(&hir, super::Prec::Alternation, &mut text);
            text
        };
        let mut names = vec![
            "Any", "ASCII", "Assigned", "LC", "Cn", "C", "L", "M", "N", "P", "S", "Z",
        ];
        names.extend([
            "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Nd", "Pc", "Sm", "Zs", "Cc", "Co",
        ]);
        names.extend([
            "Greek", "Latin", "Cyrillic", "Armenian", "Georgian", "Cherokee", "Deseret",
        ]);
        names.extend([
            "Han",
            "Common",
            "Inherited",
            "Old_Italic",
            "Adlam",
            "Glagolitic",
            "Coptic",
        ]);
        names.extend([
            "letter",
            "uppercase letter",
            "Cased_Letter",
            "digit",
            "punct",
            "Other",
        ]);
        let mut patterns = Vec::new();
        for name in names {
            for form in [
                r"\p{N}",
                r"\P{N}",
                r"[\p{N}]",
                r"[^\p{N}]",
                r"[a\P{N}9]",
                r"[\p{N}&&\PL]",
            ] {
                let pattern = form.replace('N', name).replacen(r"\PL", r"\P{L}", 1);
                patterns.push(format!("(?i){pattern}"));
                patterns.push(pattern);
            }
        }
        for &pattern in &[
            r"k",
            r"(?i)k",
            r"(?i)K",
            r"(?i)ß",
            r"(?i)ǅ",
            r"(?i)Σσς",
            r"(?i)straße",
            r"(?i)1a",
            r"(?i)[a-z]",
            r"(?i)[^a-z]",
            r"(?i)[k-m--l]",
            r"(?i)[\w&&[^k]]",
            r"(?i)[[:upper:]]",
            r"(?i)[[:^alpha:]]",
            r"(?i)[[:word:]é]",
            r"(?i)\w",
            r"(?i)\W",
            r"(?i)[^\d\s]",
            r"a(?i)b|c",
            r"(?i)a|b",
            r"((?i)a)b",
            r"(?i:a)b",
            r"a(?i:b(?-i)c)d",
            r"(?i)a(?-i:b)c",
            r"(?i)(?-i)k",
            r"(?is)k.",
            r"(?i)[\x{212A}]",
            r"(?i)\x{1E9E}",
            r"(?i)[\x{10400}-\x{1044F}]",
            r"(?i)[\x{0}-\x{10FFFF}]",
            r"(?i)[^\x{0}-\x{10FFFF}]",
            r"(?i)(?:ab|cd)+k{2}",
        ] {
            patterns.push(pattern.to_string());
        }
        for c in (0..=0x1_ffff)
            .filter_map(char::from_u32)
            .filter(|c| !c.is_ascii_control())
        {
            if super::unicode::orbit(u32::from(c)).next().is_some() {
                patterns.push(format!("(?i){}", regex_syntax::escape(&c.to_string())));
            }
        }
        assert!(patterns.len() > 3_000, "{}", patterns.len());
        for pattern in &patterns {
            assert_eq!(ours(pattern), with_tables(pattern), "{pattern}");
        }
    }

    /// Go's forms the tables of `regex-syntax` lack: `^` negating a name, `\p{Cs}` (no
    /// character is a surrogate).
    #[test]
    fn negated_names_and_surrogates_are_read_as_go_reads_them() {
        answers_as_go(&[
            (r"^\p{^Greek}$", "a", true),
            (r"^\p{^Greek}$", "λ", false),
            (r"^\P{^Greek}$", "λ", true),
            (r"^[\p{^L}]$", "1", true),
            (r"^\p{Cs}$", "a", false),
            (r"^\P{Cs}$", "a", true),
            (r"(?i)^\p{^Lu}$", "a", false),
        ]);
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
        // The guests are optimized builds; an unoptimized build's frames are several times larger,
        // so a debug run checks the same depth on a proportionally larger stack.
        let stack = if cfg!(debug_assertions) {
            4 << 20
        } else {
            256 * 1024
        };
        let deepest = format!("{}a{}", "(".repeat(249), ")".repeat(249));
        let on_small_stack = std::thread::Builder::new()
            .stack_size(stack)
            .spawn(move || compile(&deepest).is_ok_and(|r| r.is_match("a")))
            .and_then(|t| t.join().map_err(|_| std::io::Error::other("panicked")));
        assert!(on_small_stack.is_ok_and(|ok| ok));
    }
}
