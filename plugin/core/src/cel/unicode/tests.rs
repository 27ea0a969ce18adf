//! The tables against `regex-syntax`'s Unicode data (built with its Unicode features for the
//! tests only), and the name rules against Go's answers.

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, HirKind};

use super::{Named, data, folded_extra, lookup, orbit};

/// The general categories stored: every one but `Cn`, which is what they leave.
const CATEGORIES: [&str; 29] = [
    "Cc", "Cf", "Co", "Cs", "Ll", "Lm", "Lo", "Lt", "Lu", "Mc", "Me", "Mn", "Nd", "Nl", "No", "Pc", "Pd",
    "Pe", "Pf", "Pi", "Po", "Ps", "Sc", "Sk", "Sm", "So", "Zl", "Zp", "Zs",
];

/// Unicode 16.0's scripts (`PropertyValueAliases.txt`, `sc`), but `Unknown`, Go's names for them.
const SCRIPTS: [&str; 170] = [
    "Adlam",
    "Ahom",
    "Anatolian_Hieroglyphs",
    "Arabic",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Bassa_Vah",
    "Batak",
    "Bengali",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Braille",
    "Buginese",
    "Buhid",
    "Canadian_Aboriginal",
    "Carian",
    "Caucasian_Albanian",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Common",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Cypro_Minoan",
    "Cyrillic",
    "Deseret",
    "Devanagari",
    "Dives_Akuru",
    "Dogra",
    "Duployan",
    "Egyptian_Hieroglyphs",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Garay",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Greek",
    "Gujarati",
    "Gunjala_Gondi",
    "Gurmukhi",
    "Gurung_Khema",
    "Han",
    "Hangul",
    "Hanifi_Rohingya",
    "Hanunoo",
    "Hatran",
    "Hebrew",
    "Hiragana",
    "Imperial_Aramaic",
    "Inherited",
    "Inscriptional_Pahlavi",
    "Inscriptional_Parthian",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kawi",
    "Kayah_Li",
    "Kharoshthi",
    "Khitan_Small_Script",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "Kirat_Rai",
    "Lao",
    "Latin",
    "Lepcha",
    "Limbu",
    "Linear_A",
    "Linear_B",
    "Lisu",
    "Lycian",
    "Lydian",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Masaram_Gondi",
    "Medefaidrin",
    "Meetei_Mayek",
    "Mende_Kikakui",
    "Meroitic_Cursive",
    "Meroitic_Hieroglyphs",
    "Miao",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "Nabataean",
    "Nag_Mundari",
    "Nandinagari",
    "New_Tai_Lue",
    "Newa",
    "Nko",
    "Nushu",
    "Nyiakeng_Puachue_Hmong",
    "Ogham",
    "Ol_Chiki",
    "Ol_Onal",
    "Old_Hungarian",
    "Old_Italic",
    "Old_North_Arabian",
    "Old_Permic",
    "Old_Persian",
    "Old_Sogdian",
    "Old_South_Arabian",
    "Old_Turkic",
    "Old_Uyghur",
    "Oriya",
    "Osage",
    "Osmanya",
    "Pahawh_Hmong",
    "Palmyrene",
    "Pau_Cin_Hau",
    "Phags_Pa",
    "Phoenician",
    "Psalter_Pahlavi",
    "Rejang",
    "Runic",
    "Samaritan",
    "Saurashtra",
    "Sharada",
    "Shavian",
    "Siddham",
    "SignWriting",
    "Sinhala",
    "Sogdian",
    "Sora_Sompeng",
    "Soyombo",
    "Sundanese",
    "Sunuwar",
    "Syloti_Nagri",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Tai_Le",
    "Tai_Tham",
    "Tai_Viet",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Todhri",
    "Toto",
    "Tulu_Tigalari",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Warang_Citi",
    "Yezidi",
    "Yi",
    "Zanabazar_Square",
];

/// The code points of `pattern` (one class) as `regex-syntax` translates it.
fn regex_syntax_class(pattern: &str) -> Vec<(u32, u32)> {
    let hir = regex_syntax::Parser::new()
        .parse(pattern)
        .unwrap_or_else(|e| panic!("{pattern}: {e}"));
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => ranges_of(class),
        // A class of one character is translated to the character.
        HirKind::Literal(lit) => {
            let c = std::str::from_utf8(&lit.0).ok().and_then(|s| s.chars().next());
            let c = u32::from(c.unwrap_or_else(|| panic!("{pattern}: {lit:?}")));
            vec![(c, c)]
        }
        other => panic!("{pattern}: {other:?}"),
    }
}

fn ranges_of(class: &ClassUnicode) -> Vec<(u32, u32)> {
    class
        .iter()
        .map(|r| (u32::from(r.start()), u32::from(r.end())))
        .collect()
}

/// The simple case-folding orbit of every code point that has one, as `regex-syntax` folds.
fn regex_syntax_orbits() -> Vec<(u32, Vec<u32>)> {
    let mut out = Vec::new();
    for c in (0..=char::MAX as u32).filter_map(char::from_u32) {
        let mut class = ClassUnicode::new([ClassUnicodeRange::new(c, c)]);
        class.case_fold_simple();
        let members: Vec<u32> = class
            .iter()
            .flat_map(|r| u32::from(r.start())..=u32::from(r.end()))
            .collect();
        if members.len() > 1 {
            out.push((u32::from(c), members));
        }
    }
    out
}

fn leb128(mut value: u32, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn encode_ranges(ranges: &[(u32, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut next = 0;
    for &(start, end) in ranges {
        leb128(start - next, &mut out);
        leb128(end - start, &mut out);
        next = end + 1;
    }
    out
}

/// A byte string literal, wrapped with `\` line continuations.
fn literal(bytes: &[u8], indent: &str) -> String {
    let mut out = String::from("b\"");
    let mut line = indent.len() + 2;
    for &b in bytes {
        let piece = match b {
            b'"' => "\\\"".to_string(),
            b'\\' => "\\\\".to_string(),
            // Not a space: a line continuation drops the spaces that start the next line.
            b'!'..=b'~' => char::from(b).to_string(),
            _ => format!("\\x{b:02x}"),
        };
        if line + piece.len() > 98 {
            out.push_str("\\\n");
            out.push_str(indent);
            line = indent.len();
        }
        line += piece.len();
        out.push_str(&piece);
    }
    out.push('"');
    out
}

/// The text of `data.rs`, from `regex-syntax`'s tables.
fn generate() -> String {
    let mut out = String::from(
        "//! Generated from `regex-syntax`'s Unicode 16.0 tables by\n\
         //! `SA_REGENERATE=1 cargo test -p sharing-affinity-core --lib cel::unicode`; do not edit.\n\
         //! Ranges: per range, the LEB128 gap after the previous one and its length minus one.\n\
         //! Folds: per code point with an orbit, the LEB128 gap after the previous one and the\n\
         //! zigzag-coded step to the next member of its orbit.\n\n",
    );
    let mut table = |name: &str, rows: Vec<(&str, Vec<(u32, u32)>)>| {
        out.push_str(&format!(
            "pub(super) const {name}: [(&str, &[u8]); {}] = [\n",
            rows.len()
        ));
        for (key, ranges) in rows {
            let bytes = encode_ranges(&ranges);
            out.push_str(&format!("    ({key:?}, {}),\n", literal(&bytes, "        ")));
        }
        out.push_str("];\n\n");
    };
    table(
        "CATEGORIES",
        CATEGORIES
            .iter()
            .map(|&c| match c {
                // Surrogates are no characters: regex-syntax has no such class, Go's matches none.
                "Cs" => (c, Vec::new()),
                _ => (c, regex_syntax_class(&format!(r"\p{{gc={c}}}"))),
            })
            .collect(),
    );
    table(
        "SCRIPTS",
        SCRIPTS
            .iter()
            .map(|s| (*s, regex_syntax_class(&format!(r"\p{{sc={s}}}"))))
            .collect(),
    );
    let mut folds = Vec::new();
    let mut previous = 0;
    for (c, members) in regex_syntax_orbits() {
        let next = members.iter().copied().find(|&m| m > c).unwrap_or(members[0]);
        leb128(c - previous, &mut folds);
        let step = if next > c {
            2 * (next - c)
        } else {
            2 * (c - next) - 1
        };
        leb128(step, &mut folds);
        previous = c;
    }
    out.push_str(&format!(
        "pub(super) const FOLDS: &[u8] = {};\n",
        literal(&folds, "    ")
    ));
    out
}

/// `data.rs` is what `regex-syntax`'s tables give; `SA_REGENERATE=1` rewrites it.
#[test]
fn the_stored_tables_are_regex_syntax_s() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/cel/unicode/data.rs");
    let generated = generate();
    if std::env::var_os("SA_REGENERATE").is_some() {
        std::fs::write(path, &generated).expect("write data.rs");
    }
    let stored = std::fs::read_to_string(path).expect("read data.rs");
    assert!(
        stored == generated,
        "{path} is not what regex-syntax's tables give: \
         SA_REGENERATE=1 cargo test -p sharing-affinity-core --lib cel::unicode"
    );
}

/// Every name resolves to `regex-syntax`'s class of the same name: the stored categories and
/// scripts, and the ones put together from them (`L`, `C` with `Cn`, `LC`, `Cn`, `Assigned`).
#[test]
fn every_class_is_regex_syntax_s() {
    let mut names: Vec<&str> = ["Any", "ASCII", "Assigned", "LC", "Cn"].to_vec();
    names.extend(super::MAJOR);
    names.extend(CATEGORIES.iter().filter(|&&c| c != "Cs"));
    names.extend(SCRIPTS);
    for name in names {
        let named = lookup(name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(named.name, name);
        let theirs = match name {
            "Any" | "ASCII" | "Assigned" => format!(r"\p{{{name}}}"),
            _ if SCRIPTS.contains(&name) => format!(r"\p{{sc={name}}}"),
            _ => format!(r"\p{{gc={name}}}"),
        };
        assert_eq!(
            without_surrogates(named.ranges()),
            without_surrogates(regex_syntax_class(&theirs)),
            "{name}"
        );
    }
    assert_eq!(lookup("Cs").map(|n| n.ranges()), Some(Vec::new()));
}

/// `ranges` without the surrogate code points, which are no characters.
fn without_surrogates(ranges: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for (start, end) in ranges {
        if start < 0xd800 {
            out.push((start, end.min(0xd7ff)));
        }
        if end > 0xdfff {
            out.push((start.max(0xe000), end));
        }
    }
    out
}

/// Names as Go 1.26's `regexp.Compile(`\p{name}`)` took them (`go run`, 2026-12-04), but
/// for the scripts with `_` in their names, which Go 1.25 and 1.26 cannot find (see the
/// module's documentation): `Some` is the canonical name it resolved to.
#[test]
fn names_are_looked_up_as_go_looks_them_up() {
    let cases: &[(&str, Option<&str>)] = &[
        ("L", Some("L")),
        ("Lu", Some("Lu")),
        ("lu", Some("Lu")),
        ("LU", Some("Lu")),
        ("Letter", Some("L")),
        ("letter", Some("L")),
        ("Uppercase_Letter", Some("Lu")),
        ("uppercase letter", Some("Lu")),
        ("uppercase-letter", Some("Lu")),
        ("Greek", Some("Greek")),
        ("greek", Some("Greek")),
        ("GREEK", Some("Greek")),
        ("Any", Some("Any")),
        ("any", Some("Any")),
        ("ASCII", Some("ASCII")),
        ("ascii", Some("ASCII")),
        ("Assigned", Some("Assigned")),
        ("Cn", Some("Cn")),
        ("LC", Some("LC")),
        ("Cased_Letter", Some("LC")),
        ("C", Some("C")),
        ("Other", Some("C")),
        ("Unassigned", Some("Cn")),
        ("Common", Some("Common")),
        ("Inherited", Some("Inherited")),
        ("punct", Some("P")),
        ("Punctuation", Some("P")),
        ("P", Some("P")),
        (" L", Some("L")),
        ("Nko", Some("Nko")),
        ("NKo", Some("Nko")),
        ("Han", Some("Han")),
        ("Latin", Some("Latin")),
        ("Braille", Some("Braille")),
        ("Lm", Some("Lm")),
        ("Combining_Mark", Some("M")),
        ("digit", Some("Nd")),
        ("Nd", Some("Nd")),
        ("Zs", Some("Zs")),
        ("Space_Separator", Some("Zs")),
        ("cntrl", Some("Cc")),
        // Go 1.26 fails these (its script lookup skips the canonical form); Go 1.24 took
        // `Old_Italic` and `Phags_Pa` as written.
        ("Old_Italic", Some("Old_Italic")),
        ("old italic", Some("Old_Italic")),
        ("Phags_Pa", Some("Phags_Pa")),
        ("SignWriting", Some("SignWriting")),
        // Unknown to Go.
        ("Grek", None),
        ("L&", None),
        ("gc=L", None),
        ("sc=Greek", None),
        ("Script=Greek", None),
        ("scx=Greek", None),
        ("Alphabetic", None),
        ("Zyyy", None),
        ("Zinh", None),
        ("isL", None),
        ("Is_Greek", None),
        ("Hani", None),
        ("Latn", None),
        ("Brai", None),
        ("Katakana_Or_Hiragana", None),
        ("Hrkt", None),
        ("Zzzz", None),
        ("Unknown", None),
        ("space", None),
        ("", None),
        ("^", None),
    ];
    for &(name, want) in cases {
        assert_eq!(lookup(name).map(|n| n.name), want, "{name:?}");
        assert!(lookup(name).is_none_or(|n| !n.negated), "{name:?}");
        let negated = lookup(&format!("^{name}"));
        assert_eq!(negated.map(|n| n.name), want, "^{name:?}");
        assert!(negated.is_none_or(|n| n.negated), "^{name:?}");
    }
}

/// The stored orbits are `regex-syntax`'s simple case folding, code point by code point.
#[test]
fn orbits_are_simple_case_folding() {
    let orbits = regex_syntax_orbits();
    assert!(orbits.len() > 2_800, "{}", orbits.len());
    let mut with_orbits = orbits.iter().map(|(c, _)| *c).peekable();
    for c in (0..=char::MAX as u32).filter(|&c| char::from_u32(c).is_some()) {
        let mut ours: Vec<u32> = orbit(c).chain([c]).collect();
        ours.sort_unstable();
        if with_orbits.next_if_eq(&c).is_some() {
            let (_, theirs) = orbits.iter().find(|(of, _)| *of == c).expect("listed");
            assert_eq!(&ours, theirs, "U+{c:04X}");
        } else {
            assert_eq!(ours, [c], "U+{c:04X}");
        }
    }
    let kelvin: Vec<u32> = orbit(u32::from('k')).collect();
    assert_eq!(kelvin, [0x212a, u32::from('K')]);
}

/// What folding adds to a class is what `regex-syntax`'s folding adds, for classes of every
/// size: each stored category and script, single characters, and ranges across case blocks.
#[test]
fn folding_a_class_adds_what_regex_syntax_adds() {
    let mut classes: Vec<Vec<(u32, u32)>> = CATEGORIES
        .iter()
        .chain(&SCRIPTS)
        .filter_map(|name| lookup(name))
        .map(|n| n.ranges())
        .collect();
    classes.extend([
        vec![(u32::from('a'), u32::from('z'))],
        vec![(u32::from('k'), u32::from('k'))],
        vec![(u32::from('A'), u32::from('J')), (u32::from('L'), u32::from('Z'))],
        vec![(0x370, 0x3ff), (0x1e00, 0x1eff)],
        vec![(0, 0x10ffff)],
        vec![],
    ]);
    for ranges in classes {
        let ranges = without_surrogates(ranges);
        let mut theirs = ClassUnicode::new(ranges.iter().map(|&(s, e)| {
            ClassUnicodeRange::new(char::from_u32(s).expect("char"), char::from_u32(e).expect("char"))
        }));
        theirs.case_fold_simple();
        let mut ours: Vec<(u32, u32)> = ranges.clone();
        ours.extend(folded_extra(&ranges).into_iter().map(|c| (c, c)));
        ours.sort_unstable();
        assert_eq!(
            without_surrogates(super::merge(ours)),
            without_surrogates(ranges_of(&theirs)),
            "{ranges:?}"
        );
    }
}

#[test]
fn a_named_class_reads_as_its_ranges_negated_as_written() {
    let greek = lookup("^greek").expect("Greek");
    assert_eq!((greek.name, greek.negated), ("Greek", true));
    assert!(
        greek
            .ranges()
            .iter()
            .any(|&(s, e)| (s..=e).contains(&u32::from('λ')))
    );
    let ascii: Named = lookup("ASCII").expect("ASCII");
    assert_eq!(ascii.ranges(), [(0, 0x7f)]);
    assert_eq!(data::CATEGORIES.len(), CATEGORIES.len());
}
