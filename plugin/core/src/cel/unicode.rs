//! The Unicode classes and case folding of Go's `regexp`, for [`super::re2`].
//!
//! Go's `\p{…}` names a general category (`Lu`, `L`, `Cn`, `LC`; or an alias: `Letter`,
//! `Uppercase_Letter`, `digit`), a script (`Greek`, `Old_Italic`) or one of `Any`, `ASCII` and
//! `Assigned`, looked up as Go 1.25 and later look names up: letter case, `_`, `-` and spaces
//! ignored (`\p{lu}`, `\p{uppercase letter}`), `^` before the name negating it (`\p{^Greek}`).
//! Script codes (`Grek`), `key=value` forms and Unicode's other properties (`Alphabetic`) are not
//! names Go knows. Where Go departs from its own rule, this module follows the rule: Go 1.25 and
//! 1.26 look a script up only by a name that is already canonical, so `\p{Old_Italic}` is an
//! error there (it compiled in Go 1.24 and earlier) and compiles here.
//!
//! The tables are the general categories, scripts and simple case folding of `regex-syntax`'s
//! Unicode data (see [`data`] for the version), stored as the ranges' gaps and lengths in LEB128
//! (a few bytes per range instead of eight) and only the 29 categories that make up the rest:
//! `L` is read as the union of `Lu`, `Ll`, `Lt`, `Lm` and `Lo`, `Cn` as what no other category
//! holds. The guests build `regex-syntax` without its own Unicode tables (about 150 KB), whose
//! aggregate categories, script extensions and property aliases Go's names never reach.
//!
//! Case folding (`(?i)`) is Go's: a character matches every character of its simple case-folding
//! orbit (`k`, `K` and the Kelvin sign `K`).

// Generated, and formatted by its generator (`tests::generate`).
#[rustfmt::skip]
mod data;

use std::sync::OnceLock;

/// A class Go's `\p{…}` names: the canonical name of what it resolved to and whether `^`
/// negated it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Named {
    /// `Any`, `ASCII`, `Assigned`, a category as Go's `unicode.Categories` names it (`Lu`, `L`,
    /// `LC`, `Cn`) or a script as `unicode.Scripts` names it (`Greek`, `Old_Italic`).
    pub(super) name: &'static str,
    /// Whether the name was written with a leading `^`.
    pub(super) negated: bool,
    kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Any,
    Ascii,
    Assigned,
    /// The categories whose names start with this letter (`L`, `C`: with `Cn`).
    Major(u8),
    /// `LC`: `Lu`, `Ll` and `Lt`.
    CasedLetter,
    /// `Cn`: what no stored category holds.
    Unassigned,
    /// A stored category: an index into [`data::CATEGORIES`].
    Category(usize),
    /// An index into [`data::SCRIPTS`].
    Script(usize),
}

/// The one-letter categories: the stored ones whose names start with the letter, plus `Cn` for
/// `C`.
const MAJOR: [&str; 7] = ["C", "L", "M", "N", "P", "S", "Z"];

/// Go's `unicode.CategoryAliases` (Unicode's `PropertyValueAliases.txt` for `gc`).
const ALIASES: [(&str, &str); 42] = [
    ("Cased_Letter", "LC"),
    ("Close_Punctuation", "Pe"),
    ("Combining_Mark", "M"),
    ("Connector_Punctuation", "Pc"),
    ("Control", "Cc"),
    ("Currency_Symbol", "Sc"),
    ("Dash_Punctuation", "Pd"),
    ("Decimal_Number", "Nd"),
    ("Enclosing_Mark", "Me"),
    ("Final_Punctuation", "Pf"),
    ("Format", "Cf"),
    ("Initial_Punctuation", "Pi"),
    ("Letter", "L"),
    ("Letter_Number", "Nl"),
    ("Line_Separator", "Zl"),
    ("Lowercase_Letter", "Ll"),
    ("Mark", "M"),
    ("Math_Symbol", "Sm"),
    ("Modifier_Letter", "Lm"),
    ("Modifier_Symbol", "Sk"),
    ("Nonspacing_Mark", "Mn"),
    ("Number", "N"),
    ("Open_Punctuation", "Ps"),
    ("Other", "C"),
    ("Other_Letter", "Lo"),
    ("Other_Number", "No"),
    ("Other_Punctuation", "Po"),
    ("Other_Symbol", "So"),
    ("Paragraph_Separator", "Zp"),
    ("Private_Use", "Co"),
    ("Punctuation", "P"),
    ("Separator", "Z"),
    ("Space_Separator", "Zs"),
    ("Spacing_Mark", "Mc"),
    ("Surrogate", "Cs"),
    ("Symbol", "S"),
    ("Titlecase_Letter", "Lt"),
    ("Unassigned", "Cn"),
    ("Uppercase_Letter", "Lu"),
    ("cntrl", "Cc"),
    ("digit", "Nd"),
    ("punct", "P"),
];

/// Whether `written` is `name` once letter case, `_`, `-` and spaces are ignored (Go's
/// `canonicalName` applied to both).
fn same_name(written: &str, name: &str) -> bool {
    let skip = |c: &u8| !matches!(c, b'_' | b'-' | b' ');
    let mut a = written.bytes().filter(skip);
    let mut b = name.bytes().filter(skip);
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x.eq_ignore_ascii_case(&y) => {}
            _ => return false,
        }
    }
}

/// What Go's `\p{written}` names, or `None` when Go knows no such class.
pub(super) fn lookup(written: &str) -> Option<Named> {
    let (negated, name) = match written.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, written),
    };
    let named = |name, kind| Some(Named { name, negated, kind });
    // In Go's order: the special names, the categories, the scripts, the aliases.
    for (special, kind) in [
        ("Any", Kind::Any),
        ("Assigned", Kind::Assigned),
        ("ASCII", Kind::Ascii),
        ("LC", Kind::CasedLetter),
        ("Cn", Kind::Unassigned),
    ] {
        if same_name(name, special) {
            return named(special, kind);
        }
    }
    if let Some(major) = MAJOR.iter().find(|m| same_name(name, m)) {
        return named(major, Kind::Major(major.as_bytes()[0]));
    }
    if let Some(i) = data::CATEGORIES.iter().position(|(c, _)| same_name(name, c)) {
        return named(data::CATEGORIES[i].0, Kind::Category(i));
    }
    if let Some(i) = data::SCRIPTS.iter().position(|(s, _)| same_name(name, s)) {
        return named(data::SCRIPTS[i].0, Kind::Script(i));
    }
    let &(_, category) = ALIASES.iter().find(|(alias, _)| same_name(name, alias))?;
    lookup(category).map(|n| Named { negated, ..n })
}

impl Named {
    /// Whether the name is a script's.
    #[cfg(any(test, feature = "regex-oracle"))]
    pub(super) fn is_script(&self) -> bool {
        matches!(self.kind, Kind::Script(_))
    }

    /// The class's code points as sorted, disjoint, non-adjacent ranges (the name's, before
    /// `^` negates them: [`Named::negated`] tells).
    pub(super) fn ranges(&self) -> Vec<(u32, u32)> {
        match self.kind {
            Kind::Any => vec![(0, MAX)],
            Kind::Ascii => vec![(0, 0x7f)],
            Kind::Assigned => assigned(),
            Kind::Unassigned => complement(&assigned()),
            Kind::CasedLetter => categories(|c| matches!(c, "Lu" | "Ll" | "Lt")),
            // `C` with `Cn`: what the other categories leave.
            Kind::Major(b'C') => complement(&categories(|c| !c.starts_with('C'))),
            Kind::Major(letter) => categories(|c| c.as_bytes()[0] == letter),
            Kind::Category(i) => decode(data::CATEGORIES[i].1),
            Kind::Script(i) => decode(data::SCRIPTS[i].1),
        }
    }
}

/// The last code point.
const MAX: u32 = char::MAX as u32;

/// Every code point some stored category holds.
fn assigned() -> Vec<(u32, u32)> {
    categories(|_| true)
}

/// The union of the stored categories `pick` chooses.
fn categories(pick: impl Fn(&str) -> bool) -> Vec<(u32, u32)> {
    let mut all: Vec<(u32, u32)> = data::CATEGORIES
        .iter()
        .filter(|(name, _)| pick(name))
        .flat_map(|(_, bytes)| decode(bytes))
        .collect();
    crate::map::sort_stable_by(&mut all, Ord::cmp);
    merge(all)
}

/// Sorted ranges merged where they overlap or touch.
fn merge(sorted: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(sorted.len());
    for (start, end) in sorted {
        match out.last_mut() {
            Some(last) if start <= last.1.saturating_add(1) => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// The code points that sorted, merged `ranges` do not hold.
fn complement(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(ranges.len() + 1);
    let mut next = 0;
    for &(start, end) in ranges {
        if start > next {
            out.push((next, start - 1));
        }
        next = end + 1;
    }
    if next <= MAX {
        out.push((next, MAX));
    }
    out
}

/// Reads one LEB128 number from the front of `bytes`.
fn leb128(bytes: &mut &[u8]) -> u32 {
    let mut value = 0;
    let mut shift = 0;
    while let Some((&byte, rest)) = bytes.split_first() {
        *bytes = rest;
        value |= u32::from(byte & 0x7f) << shift;
        shift += 7;
        if byte < 0x80 {
            break;
        }
    }
    value
}

/// A stored range list: per range, the gap after the previous range (from 0 for the first) and
/// the range's length minus one.
fn decode(mut bytes: &[u8]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut next = 0;
    while !bytes.is_empty() {
        let start = next + leb128(&mut bytes);
        let end = start + leb128(&mut bytes);
        out.push((start, end));
        next = end + 1;
    }
    out
}

/// Every code point with a case-folding orbit of more than itself, sorted, with the next member
/// of its orbit (the smallest greater one, else the smallest): Go's `unicode.SimpleFold`.
fn folds() -> &'static [(u32, u32)] {
    static FOLDS: OnceLock<Vec<(u32, u32)>> = OnceLock::new();
    FOLDS.get_or_init(|| {
        let mut bytes = data::FOLDS;
        let mut out = Vec::with_capacity(3_000);
        let mut c = 0;
        while !bytes.is_empty() {
            c += leb128(&mut bytes);
            let delta = leb128(&mut bytes);
            // Zigzag: even deltas are forward, odd ones backward.
            let next = if delta & 1 == 0 {
                c + delta / 2
            } else {
                c - delta.div_ceil(2)
            };
            out.push((c, next));
        }
        out
    })
}

/// The other members of `c`'s case-folding orbit, in orbit order.
pub(super) fn orbit(c: u32) -> impl Iterator<Item = u32> {
    let folds = folds();
    let next = move |c: u32| {
        folds
            .binary_search_by_key(&c, |&(from, _)| from)
            .ok()
            .map(|i| folds[i].1)
    };
    let mut at = next(c);
    std::iter::from_fn(move || {
        let current = at.filter(|&member| member != c)?;
        at = next(current);
        Some(current)
    })
}

/// The code points outside `ranges` (sorted) that case folding adds to them, in no order and
/// possibly repeated (the translator sorts and merges a class's ranges).
pub(super) fn folded_extra(ranges: &[(u32, u32)]) -> Vec<u32> {
    let folds = folds();
    let inside = |c: u32| {
        ranges
            .binary_search_by(|&(start, end)| {
                if end < c {
                    std::cmp::Ordering::Less
                } else if start > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    };
    let mut extra = Vec::new();
    for &(start, end) in ranges {
        let first = folds.partition_point(|&(c, _)| c < start);
        for &(c, _) in folds[first..].iter().take_while(|&&(c, _)| c <= end) {
            extra.extend(orbit(c).filter(|&m| !inside(m)));
        }
    }
    extra
}

#[cfg(test)]
mod tests;
