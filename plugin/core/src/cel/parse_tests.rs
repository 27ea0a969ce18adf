//! The parser the core uses (cel-rust's Pratt parser, then the `macros` expansions) against
//! cel-rust's ANTLR parser, its default, through [`compare_parsers`]: both must accept the same
//! sources and build the same trees, node ids aside. The sources are a table of the grammar's
//! corners, expressions generated from the grammar with a fixed seed, and the generated
//! expressions with one byte dropped, doubled or replaced (mostly errors, which both must
//! reject). The fuzz target `cel_parsers` compares them on what libFuzzer finds.

use super::parse::MAX_NESTING;
use super::parser_oracle::compare_parsers;

/// Compares the two parsers on `source`; returns whether it parsed.
fn same_tree(source: &str) -> bool {
    compare_parsers(source).unwrap_or_else(|disagreement| panic!("{disagreement}"))
}

/// The grammar's corners, each with whether it parses.
const CORNERS: &[(&str, bool)] = &[
    // literals
    ("0", true),
    ("42 == 0x2A", true),
    ("-7", true),
    ("- 7", true),
    ("--7", true),
    ("-(7)", true),
    ("9223372036854775807", true),
    ("-9223372036854775808", true),
    ("9223372036854775808", false),
    ("18446744073709551615u", true),
    ("18446744073709551616u", false),
    ("1U + 0x1fu", true),
    ("0X7", false),
    ("0X1u", false),
    ("!-0X7", false),
    ("0xAbC + 0xFFu", true),
    ("1.5 + 1e3 + 2.5e-3 + .5 + 1.0E+2", true),
    ("1.", false),
    ("1e", false),
    ("true && false || null == null", true),
    (r#""a" + 'b' + "\n\t\"\\" + '\''"#, true),
    (r#""\u00e9\x41\101\U0001F600" + "é""#, true),
    (r#""\400""#, false),
    (r#""\z""#, false),
    (r#"r"raw\d" + R'raw\w' + r'''x''' + R"""y""""#, true),
    (r#""""tri"ple""" + '''a'b'''"#, true),
    (
        r#"b"bytes\xff\377" + B'x' + br"\d" + bR'\w' + Br'x' + BR"y""#,
        true,
    ),
    (r#"rb"\d""#, false),
    (r#"Rb'\d'"#, false),
    (r#"xr"\d""#, false),
    (r#"b"\u00e9""#, false),
    (r#""unterminated"#, false),
    ("\"line\nbreak\"", false),
    ("\"\"\"line\nbreak\"\"\"", true),
    // identifiers, reserved words, selections and indexes
    ("device.driver", true),
    ("device.attributes[\"dra.example.com\"].model", true),
    (".device.driver", true),
    ("a.b.c.d.e.f", true),
    ("a[0][1]['k'].x", true),
    ("a.?b.?c", true),
    ("a[?0][?'k']", true),
    ("a.?", false),
    ("in", false),
    ("as + break + const", false),
    ("package", false),
    ("namespace.x", false),
    ("void()", false),
    ("a.if", true),
    ("a.true", false),
    ("a.in", false),
    ("`a.b`", false),
    ("a.`b-c`", false),
    // operators and precedence
    ("1 + 2 * 3 - 4 / 5 % 6", true),
    ("1 < 2 == 2 <= 3 != 3 > 4 >= 5", true),
    ("!a && !!b || !!!c", true),
    ("a ? b : c ? d : e", true),
    ("a || b ? c && d : e || f", true),
    ("(a ? b : c) ? d : e", true),
    ("'a' in ['a'] && 1 in {1: 2}", true),
    ("a in b in c", true),
    ("a == b == c", true),
    ("-a.b", true),
    ("!a.b()", true),
    ("1 +", false),
    ("* 1", false),
    ("a ? b", false),
    ("a ? b :", false),
    ("(a", false),
    ("a)", false),
    ("a && || b", false),
    ("a = b", false),
    ("a === b", false),
    ("1 + 2 // a comment", true),
    ("1 + // a comment\n 2", true),
    ("1 + /* not a comment */ 2", false),
    // unary chains: one operator repeated; `-` after `!` only as a number's sign
    ("!-2 || !- 2 || !-2.5 || !-.5 || !-0x1F || !!-2 || !-2e3", true),
    ("!-x", false),
    ("-!x", false),
    ("- -!x", false),
    ("!--2", false),
    ("!-3u", false),
    ("!-(2)", false),
    ("!(-x) && -(!x)", true),
    ("a - !b", true),
    ("a-!b", true),
    ("a - -b", true),
    ("(a)-!b", true),
    ("[1]-!b", true),
    ("!-// c\n2", true),
    ("!-2.f", true),
    ("-2.f", true),
    ("-2 .f", true),
    ("--2", true),
    ("-3u", true),
    ("a != -b && !a == -b", true),
    // a number ends where a word starts
    (
        "7in [7] && .5in [.5] && 3uin [3u] && 0x10in [16] && 1e3in [1000.0] && !-2in [1]",
        true,
    ),
    ("7abc", false),
    ("1e", false),
    ("0x", false),
    ("1.5f", false),
    ("  \t\r\n1\n", true),
    ("\x0c1\x0c", true),
    ("a\x0bb", false),
    ("a\u{a0}+ b", false),
    ("1 +\u{2028}2", false),
    ("\u{3000}1", false),
    ("'\x0b\u{a0}' + \"\u{2028}\" // \u{a0}", true),
    ("é", false),
    ("aé", false),
    ("a.é", false),
    ("'é' + b'é'", true),
    ("", false),
    ("   ", false),
    // calls, lists, maps, messages
    ("size(a) + a.size() + f() + a.f(1, 2, 3)", true),
    ("f(,)", false),
    ("f(1,)", false),
    ("a.f(1)(2)", false),
    ("[] + [1] + [1, 2,] + [?a, b, ?c]", true),
    ("[,]", true),
    ("[ , ]", true),
    ("[,,]", false),
    ("{,}", true),
    ("Foo{,}", true),
    ("[1,,]", false),
    ("{} + {1: 2} + {'a': 1, 'b': 2,} + {?'k': a, 'l': b}", true),
    ("{1}", false),
    ("{1: }", false),
    ("Foo{} + Foo{a: 1} + a.b.Foo{a: 1, ?b: 2,} + .Foo{}", true),
    ("Foo{1: 2}", false),
    ("Foo{a.b: 1}", false),
    ("f()()", false),
    // standard macros
    ("has(a.b) && has(a.b.c)", true),
    ("has(a)", false),
    ("has(a[0])", false),
    ("has(a.b, c)", true),
    (
        "a.all(x, x > 0) && a.exists(x, x > 0) && a.exists_one(x, x > 0)",
        true,
    ),
    (
        "a.all(x, y, x > y) && a.exists(k, v, v) && a.exists_one(k, v, v)",
        true,
    ),
    (
        "a.map(x, x * 2) + a.map(x, x > 0, x * 2) + a.filter(x, x > 0)",
        true,
    ),
    ("a.map(i, v, v) + a.transformList(i, v, v)", true),
    ("a.all(1, x)", false),
    ("a.all(x.y, x)", false),
    ("a.map(x)", true),
    ("all(a, x, x)", true),
    ("a.all(x, x.all(y, y.exists(z, z)))", true),
    ("[1, 2].map(x, [x].filter(y, y > 0)).size() > 0", true),
    // the macros expanded after parsing
    ("cel.bind(x, 1, x + 1)", true),
    ("cel.bind(x, 2, cel.bind(y, x * 3, y == 6))", true),
    ("cel.bind(x, [1, 2].map(y, y * 2), x.all(z, z > 0))", true),
    ("cel.bind(device, 1, device == 1)", true),
    ("cel.bind(a.b, 1, true)", false),
    ("cel.bind(1, 1, true)", false),
    ("cel.bind(x, 1)", true),
    ("other.bind(x, 1, x)", true),
    ("bind(x, 1, x)", true),
    ("a.b.bind(x, 1, x)", true),
    ("a.optMap(x, x + 1)", true),
    ("a.b.optMap(x, x + 1)", true),
    ("a[0].optFlatMap(x, optional.of(x))", true),
    ("optional.of(1).optMap(x, x.optMap(y, y)).orValue(0)", true),
    ("a.optMap(x.y, x)", false),
    ("a.optMap(x)", true),
    ("optMap(a, x, x)", true),
    ("cel.bind(o, a.?b, o.optMap(v, cel.bind(w, v, w)))", true),
    ("[1].map(x, cel.bind(y, x, y.optMap(z, z)))", true),
    // long flat chains: balanced or left-deep as each parser builds them
    (
        "a && b && c && d && e && f && g && h && i && j && k && l && m && n && o && p && q",
        true,
    ),
    (
        "a || b || c || d || e || f || g || h || i || j || k || l || m || n || o || p || q",
        true,
    ),
    ("a && b || c && d || e && f || g && h", true),
    (
        "1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11 + 12 + 13 + 14 + 15 + 16 + 17 + 18",
        true,
    ),
    ("!!!!!!!!!!!!!!!!!!!!a && ---------------------b", true),
    (
        "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!a",
        false,
    ),
];

#[test]
fn source_errors_say_where() {
    let cases = [
        ("a && -!b", "<input>:1:7: '!' and a unary '-'"),
        ("x ||\n  !-y", "<input>:2:4: '!' and"),
        ("'é' + rb'x'", "<input>:1:7: string prefix 'rb'"),
        (
            "a + 'b\nc'",
            "<input>:1:5: a line break inside a single-line string",
        ),
    ];
    for (source, place) in cases {
        let error = super::parse::parse(source).unwrap_err().to_string();
        assert!(error.contains(place), "{source:?}: {error}");
    }
}

#[test]
fn the_pratt_parser_builds_what_the_antlr_parser_builds() {
    // The ANTLR parser (a test oracle, never in the guests) descends through its whole chain of
    // grammar rules for every bracket: unoptimized, the nesting limit takes more than a test
    // thread's 2 MiB.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(pratt_matches_antlr)
        .expect("a thread")
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
}

fn pratt_matches_antlr() {
    let wrong: Vec<_> = CORNERS
        .iter()
        .filter(|&&(source, parses)| same_tree(source) != parses)
        .collect();
    assert!(wrong.is_empty(), "parsed otherwise than expected: {wrong:?}");
    // Nesting up to the limits both parsers get after `check_nesting`.
    for depth in [MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1] {
        for (open, close) in [("(", ")"), ("[", "]"), ("f(", ")"), ("{1: ", "}")] {
            let source = format!("{}1{}", open.repeat(depth), close.repeat(depth));
            same_tree(&source);
        }
    }
}

/// A small deterministic generator (xorshift64*), so that the test needs no crate.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn atom(&mut self) -> String {
        const ATOMS: &[&str] = &[
            "0",
            "7",
            "0x1F",
            "3u",
            "1.5",
            "2e-3",
            ".25",
            "true",
            "false",
            "null",
            "'s'",
            "\"d\"",
            r#""\n\"""#,
            "r'\\d'",
            "b'\\xff'",
            "\"\"\"t\"\"\"",
            "x",
            "y",
            "device",
            "object",
            "a",
            "device.driver",
            "object.spec",
            "device.attributes['dra.example.com'].model",
            "-2",
            "- 2",
            "-1.5e2",
            "-0x10",
            "-3u",
            "[,]",
            "{ , }",
            "Foo{,}",
            r"br'\w'",
            r"rb'\w'",
            "'a\nb'",
            "'''a\nb'''",
            r#""""""""#,
        ];
        self.pick(ATOMS).to_owned()
    }

    fn var(&mut self) -> &'static str {
        self.pick(&["x", "y", "v", "device", "@x"])
    }

    fn expr(&mut self, depth: usize) -> String {
        if depth == 0 {
            return self.atom();
        }
        let d = depth - 1;
        match self.below(24) {
            0 => self.atom(),
            1 => {
                let ops = self.pick(&["!", "-", "!!", "--", "!-", "-!", "! -", "!!-", "- -"]);
                format!("{ops}{}", self.expr(d))
            }
            2..=5 => {
                const OPS: &[&str] = &[
                    "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "in", "&&", "||",
                ];
                let op = self.pick(OPS);
                format!("{} {op} {}", self.expr(d), self.expr(d))
            }
            6 => format!("{} ? {} : {}", self.expr(d), self.expr(d), self.expr(d)),
            7 => format!("({})", self.expr(d)),
            8 => {
                let field = self.pick(&["f", "size", "in", "true", "a_1"]);
                let sel = self.pick(&[".", ".?"]);
                format!("{}{sel}{field}", self.expr(d))
            }
            9 => format!("{}[{}{}]", self.expr(d), self.pick(&["", "?"]), self.expr(d)),
            10 => {
                let f = self.pick(&["size", "f", "string", "int", "matches", "quantity"]);
                let args = self.list(d, 3);
                format!("{f}({args})")
            }
            11 => {
                let f = self.pick(&["startsWith", "contains", "size", "matches", "compareTo"]);
                format!("{}.{f}({})", self.expr(d), self.list(d, 2))
            }
            12 => format!("[{}]", self.list(d, 3)),
            13 => {
                let n = self.below(3);
                let entries: Vec<String> = (0..n)
                    .map(|_| format!("{}{}: {}", self.pick(&["", "?"]), self.expr(d), self.expr(d)))
                    .collect();
                format!("{{{}}}", entries.join(", "))
            }
            14 => {
                let field = self.pick(&["a", "b", "?c"]);
                format!(
                    "{}{{{field}: {}}}",
                    self.pick(&["Foo", "a.Foo", ".Foo"]),
                    self.expr(d)
                )
            }
            15 => format!("has({}.{})", self.expr(d), self.pick(&["f", "g"])),
            16 | 17 => {
                let m = self.pick(&["all", "exists", "exists_one", "map", "filter"]);
                let (v, body) = (self.var(), self.expr(d));
                match self.below(3) {
                    0 => format!("{}.{m}({v}, {body})", self.expr(d)),
                    1 => format!("{}.{m}({v}, {}, {body})", self.expr(d), self.var()),
                    _ => format!(
                        "{}.{m}({v}, {}, {}, {body})",
                        self.expr(d),
                        self.var(),
                        self.expr(d)
                    ),
                }
            }
            18 | 19 => {
                let (v, init, body) = (self.var(), self.expr(d), self.expr(d));
                format!("cel.bind({v}, {init}, {body})")
            }
            20 | 21 => {
                let m = self.pick(&["optMap", "optFlatMap"]);
                let (target, v, body) = (self.expr(d), self.var(), self.expr(d));
                format!("{target}.{m}({v}, {body})")
            }
            22 => format!("{} // c\n", self.expr(d)),
            _ => format!(
                "{}.bind({}, {}, {})",
                self.pick(&["a", "cel.x", "x.y"]),
                self.var(),
                self.expr(d),
                self.expr(d)
            ),
        }
    }

    fn list(&mut self, depth: usize, max: usize) -> String {
        let n = self.below(max + 1);
        (0..n).map(|_| self.expr(depth)).collect::<Vec<_>>().join(", ")
    }

    /// `source` with one byte dropped, doubled or replaced by a byte of the grammar.
    fn mutate(&mut self, source: &str) -> String {
        let mut bytes = source.as_bytes().to_vec();
        if bytes.is_empty() {
            return String::new();
        }
        let at = self.below(bytes.len());
        const BYTES: &[u8] = b"()[]{}.,?:!-+*/%<>=&|'\"\\ \nab0_`@";
        match self.below(3) {
            0 => {
                bytes.remove(at);
            }
            1 => bytes.insert(at, bytes[at]),
            _ => bytes[at] = BYTES[self.below(BYTES.len())],
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[test]
fn the_parsers_agree_on_generated_expressions() {
    let mut generator = Gen(0x5EED_CE1D_0000_0001);
    let (mut parsed, mut rejected) = (0, 0);
    for i in 0..5000 {
        let source = generator.expr(1 + i % 5);
        let mutated = generator.mutate(&source);
        for s in [source, mutated] {
            if same_tree(&s) {
                parsed += 1;
            } else {
                rejected += 1;
            }
        }
    }
    // The generator must exercise both outcomes, or the comparison proves little.
    eprintln!("generated: {parsed} parsed, {rejected} rejected by both parsers");
    assert!(
        parsed > 3000 && rejected > 3000,
        "parsed {parsed}, rejected {rejected}"
    );
}

/// The parser the guests use stays within their 512 KiB stack at the nesting limit (a quarter of
/// it in an optimized build; an unoptimized build's frames are larger, so a debug run gets a
/// proportionally larger stack), and one bracket more is an error, not a deeper recursion.
#[test]
fn the_core_parser_fits_the_guest_stack_at_the_nesting_limit() {
    let stack = if cfg!(debug_assertions) {
        4 << 20
    } else {
        128 * 1024
    };
    let fits = std::thread::Builder::new()
        .stack_size(stack)
        .spawn(|| {
            for (open, close) in [
                ("(", ")"),
                ("[", "]"),
                ("f(", ")"),
                ("{1: ", "}"),
                ("!(", ")"),
                ("-(", ")"),
            ] {
                let at_limit = format!("{}1{}", open.repeat(MAX_NESTING), close.repeat(MAX_NESTING));
                let check =
                    super::parse::check_nesting(&at_limit).and_then(|()| super::parse::parse(&at_limit));
                assert!(check.is_ok() || open == "!(" || open == "-(", "{open}: {check:?}");
                let past = format!(
                    "{}1{}",
                    open.repeat(MAX_NESTING + 1),
                    close.repeat(MAX_NESTING + 1)
                );
                assert!(
                    super::parse::check_nesting(&past).is_err(),
                    "{open} past the limit"
                );
            }
            let chain = vec!["1"; 10_000].join(" + ");
            let _ = super::parse::check_nesting(&chain).and_then(|()| super::parse::parse(&chain));
        })
        .expect("a thread")
        .join();
    assert!(fits.is_ok(), "the parser panicked or overflowed its stack");
}
