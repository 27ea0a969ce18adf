//! The regex crate as the oracle of [`super::re2`]: what `matches()` answers (`regex-syntax`'s
//! translation written out for `regex-lite`) against the regex crate given the same pattern,
//! with Go's ASCII Perl classes and word boundaries. Used by its own tests, the fuzz target
//! `regex` and the replay of its corpus (host tests).

use regex_syntax::ast::{
    self, Assertion, AssertionKind, Ast, ClassSet, ClassSetItem, ClassUnicode, ClassUnicodeKind,
    ClassUnicodeOpKind, Flag, Flags, FlagsItem, FlagsItemKind, Group, GroupKind,
};

/// Whether `pattern` compiles with `matches()` and with the regex crate alike, and matches
/// every one of `texts` alike: `Ok(Some(n))` when both compile and agree (`n` texts match),
/// `Ok(None)` when both reject it, or when either stops at its size limit (the two engines
/// measure size differently); `Err` names the pattern, the text and both answers.
pub fn compare_regex(pattern: &str, texts: &[&str]) -> Result<Option<usize>, String> {
    match (super::re2::compile(pattern), oracle(pattern)) {
        (Ok(ours), Ok(oracle)) => {
            let mut matched = 0;
            for text in texts {
                let (lite, full) = (ours.is_match(text), oracle.is_match(text));
                if lite != full {
                    return Err(format!(
                        "{pattern:?} on {text:?}: matches() says {lite}, the regex crate {full}"
                    ));
                }
                matched += usize::from(lite);
            }
            Ok(Some(matched))
        }
        (Err(_), Err(_)) => Ok(None),
        (Ok(_), Err(e)) | (Err(e), Ok(_)) if e.to_lowercase().contains("size limit") => Ok(None),
        // Go's limits on a pattern's shape (`a**`, counts over 1000), which the regex crate does
        // not have: tested against Go's own messages in `re2::limits`.
        (Err(e), Ok(_)) if e.starts_with("error parsing regexp: ") => Ok(None),
        (Ok(_), Err(e)) => Err(format!(
            "{pattern:?}: matches() compiles it, the regex crate: {e}"
        )),
        (Err(e), Ok(_)) => Err(format!(
            "{pattern:?}: the regex crate compiles it, matches(): {e}"
        )),
    }
}

/// The regex crate given `pattern` with Go's meaning: Perl classes rewritten as `matches()`
/// rewrites them, word boundaries wrapped in `(?-u:…)` (the regex crate's ASCII ones), Unicode
/// classes named by the names Go's lookup gives them (`\p{letter}` as `\p{gc=L}`: the regex
/// crate's loose lookup knows more names than Go), and the `u` flag, which Go lacks, refused.
fn oracle(pattern: &str) -> Result<regex::Regex, String> {
    let mut tree = ast::parse::Parser::new()
        .parse(pattern)
        .map_err(|e| regex_syntax::Error::from(e).to_string())?;
    go_names(&mut tree)?;
    super::re2::to_ascii(&mut tree);
    ascii_boundaries(&mut tree);
    let mut text = String::new();
    ast::print::Printer::new()
        .print(&tree, &mut text)
        .map_err(|e| e.to_string())?;
    regex::Regex::new(&text).map_err(|e| e.to_string())
}

/// Refuses the `u` flag and names each Unicode class as Go's lookup resolves it, for the regex
/// crate: `gc=` a category, `sc=` a script, `Any`, `ASCII` or `Assigned`.
fn go_names(tree: &mut Ast) -> Result<(), String> {
    let no_u = |flags: &Flags| {
        let u = FlagsItemKind::Flag(Flag::Unicode);
        match flags.items.iter().any(|item| item.kind == u) {
            true => Err("Go has no `u` flag".to_string()),
            false => Ok(()),
        }
    };
    match tree {
        Ast::Flags(set) => no_u(&set.flags),
        Ast::Group(g) => {
            if let GroupKind::NonCapturing(flags) = &g.kind {
                no_u(flags)?;
            }
            go_names(&mut g.ast)
        }
        Ast::ClassUnicode(class) => go_name(class),
        Ast::ClassBracketed(class) => set_go_names(&mut class.kind),
        Ast::Repetition(r) => go_names(&mut r.ast),
        Ast::Alternation(a) => a.asts.iter_mut().try_for_each(go_names),
        Ast::Concat(c) => c.asts.iter_mut().try_for_each(go_names),
        _ => Ok(()),
    }
}

fn set_go_names(set: &mut ClassSet) -> Result<(), String> {
    match set {
        ClassSet::Item(item) => item_go_names(item),
        ClassSet::BinaryOp(op) => {
            set_go_names(&mut op.lhs)?;
            set_go_names(&mut op.rhs)
        }
    }
}

fn item_go_names(item: &mut ClassSetItem) -> Result<(), String> {
    match item {
        ClassSetItem::Unicode(class) => go_name(class),
        ClassSetItem::Bracketed(class) => set_go_names(&mut class.kind),
        ClassSetItem::Union(union) => union.items.iter_mut().try_for_each(item_go_names),
        _ => Ok(()),
    }
}

fn go_name(class: &mut ClassUnicode) -> Result<(), String> {
    let named = super::re2::go_class_name(class).ok_or("not a class Go knows")?;
    class.negated ^= named.negated;
    let value = |name: &str, value: &str| ClassUnicodeKind::NamedValue {
        op: ClassUnicodeOpKind::Equal,
        name: name.to_string(),
        value: value.to_string(),
    };
    class.kind = match named.name {
        "Any" | "ASCII" | "Assigned" => ClassUnicodeKind::Named(named.name.to_string()),
        // No character is a surrogate: the class of none.
        "Cs" => {
            class.negated = !class.negated;
            ClassUnicodeKind::Named("Any".to_string())
        }
        name if named.is_script() => value("sc", name),
        name => value("gc", name),
    };
    Ok(())
}

/// Wraps every assertion but the anchors in `(?-u:…)`.
fn ascii_boundaries(tree: &mut Ast) {
    match tree {
        Ast::Assertion(a) if !is_anchor(a) => {
            let span = a.span;
            let assertion = std::mem::replace(tree, Ast::empty(span));
            let item = |kind| FlagsItem { span, kind };
            let flags = vec![
                item(FlagsItemKind::Negation),
                item(FlagsItemKind::Flag(Flag::Unicode)),
            ];
            *tree = Ast::group(Group {
                span,
                kind: GroupKind::NonCapturing(Flags { span, items: flags }),
                ast: Box::new(assertion),
            });
        }
        Ast::Repetition(r) => ascii_boundaries(&mut r.ast),
        Ast::Group(g) => ascii_boundaries(&mut g.ast),
        Ast::Alternation(a) => a.asts.iter_mut().for_each(ascii_boundaries),
        Ast::Concat(c) => c.asts.iter_mut().for_each(ascii_boundaries),
        _ => {}
    }
}

fn is_anchor(a: &Assertion) -> bool {
    matches!(
        a.kind,
        AssertionKind::StartLine | AssertionKind::EndLine | AssertionKind::StartText | AssertionKind::EndText
    )
}

#[cfg(test)]
mod tests {
    use super::compare_regex;

    /// Pattern fragments: characters (case-folded ones among them), Unicode, negated and POSIX
    /// classes, Go's ASCII Perl classes and word boundaries, flags, anchors, groups,
    /// alternation and repetitions greedy and lazy.
    const FRAGMENTS: &[&str] = &[
        "a",
        "b",
        "é",
        "K",
        "ß",
        "λ",
        ".",
        r"\d",
        r"\D",
        r"\w",
        r"\W",
        r"\s",
        r"\S",
        r"\b",
        r"\B",
        r"\pL",
        r"\p{Lu}",
        r"\P{Greek}",
        r"[\d\p{Han}]",
        r"[^a-z\s]",
        r"[^a-cé]",
        "[[:upper:]]",
        r"\x{212A}",
        r"\n",
        "(?i)",
        "(?s)",
        "(?m)",
        "(?U)",
        "(?x) ",
        "(?-i)",
        "^",
        "$",
        r"\A",
        r"\z",
        "(",
        ")",
        "(?:",
        "(?i:",
        "(?-u:",
        "(?-u)",
        r"\p{^Greek}",
        r"\p{letter}",
        r"[\p{Lu}\P{Cased_Letter}]",
        r"[k-m--l]",
        "[[:^alpha:]]",
        r"\p{Grek}",
        "|",
        "*",
        "+",
        "?",
        "??",
        "{2}",
        "{1,3}?",
        "*?",
        "+?",
    ];
    /// ASCII and non-ASCII texts: case variants (`ß`/`SS`, the Kelvin sign), scripts, digits
    /// Go's `\d` does not take, line breaks for `(?m)` and `(?s)`.
    const TEXTS: &[&str] = &[
        "",
        "a",
        "ab",
        "b\na",
        "ÉCOLE école",
        "K\u{212a}k",
        "ßSS",
        "λΛ",
        "日本 1",
        "A1_b2 ",
        "\n\n",
        "١٢",
        "x\r\ny",
    ];

    /// Every pattern of two fragments and a tail: `matches()` and the oracle agree on which
    /// compile and on every text.
    #[test]
    fn every_pair_of_fragments_agrees_with_the_regex_crate() {
        let (mut tried, mut compiled, mut matched) = (0, 0, 0);
        for a in FRAGMENTS {
            for b in FRAGMENTS {
                for c in ["", "b", ")", "+", "$", r"\b"] {
                    tried += 1;
                    match compare_regex(&format!("{a}{b}{c}"), TEXTS) {
                        Ok(Some(n)) => (compiled, matched) = (compiled + 1, matched + n),
                        Ok(None) => {}
                        Err(disagreement) => panic!("{disagreement}"),
                    }
                }
            }
        }
        // 14,406 patterns: 7,560 compile, 30,453 of their texts match.
        assert!(
            compiled > 7_000 && matched > 25_000,
            "{compiled} of {tried} compiled, {matched} matches"
        );
    }

    /// 5,000 patterns of one to eight fragments drawn with a fixed seed: `matches()` and the
    /// oracle agree on which compile and on every text.
    #[test]
    fn generated_patterns_agree_with_the_regex_crate() {
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            usize::try_from(state >> 33).unwrap_or(0) % n
        };
        let mut compiled = 0;
        for _ in 0..5_000 {
            let len = 1 + next(8);
            let pattern: String = (0..len).map(|_| FRAGMENTS[next(FRAGMENTS.len())]).collect();
            match compare_regex(&pattern, TEXTS) {
                Ok(found) => compiled += usize::from(found.is_some()),
                Err(disagreement) => panic!("{disagreement}"),
            }
        }
        assert!(compiled > 2_000, "{compiled} of 5,000 compiled");
    }
}
