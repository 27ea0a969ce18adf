//! Table tests for the DRA CEL environment: selectors over prepared devices, extractors over
//! JSON objects, the Kubernetes quantity and semver libraries, `cel.bind`, compile checks and
//! the cost budget.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::model::AttributeValue as A;

/// What an evaluation should give.
#[derive(Debug)]
enum Want {
    True,
    False,
    /// A runtime error containing this text.
    Runtime(&'static str),
    /// A compile error containing this text.
    Compile(&'static str),
    /// A wrong-type error naming this type.
    WrongType(&'static str),
}
use Want::*;

fn q(s: &str) -> Quantity {
    s.parse().unwrap()
}

fn device(
    driver: &str,
    attributes: &[(&str, A)],
    capacity: &[(&str, &str)],
    allow_multiple_allocations: bool,
) -> CelDevice {
    let attributes: BTreeMap<String, A> = attributes
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let capacity: BTreeMap<String, Quantity> = capacity.iter().map(|(k, v)| (k.to_string(), q(v))).collect();
    CelDevice::new(driver, &attributes, &capacity, allow_multiple_allocations)
}

/// The devices of the tables, by name.
fn devices() -> BTreeMap<&'static str, CelDevice> {
    let s = |v: &str| A::String(v.into());
    BTreeMap::from([
        (
            "gpu",
            device(
                "dra.example.com",
                &[
                    ("name", A::Bool(true)),
                    ("model", s("A100-SXM")),
                    ("count", A::Int(8)),
                    ("dra.example.com/numa", A::Int(1)),
                    ("other.example.com/flag", A::Bool(false)),
                    ("tags", A::Strings(vec!["fast".into(), "big".into()])),
                    ("ints", A::Ints(vec![1, 2, 3])),
                    ("bools", A::Bools(vec![true, false])),
                    ("version", A::Version("1.2.3-rc.1".into())),
                    ("versions", A::Versions(vec!["1.0.0".into(), "2.0.0".into()])),
                    ("path", s("  /dev/nvidia0  ")),
                    ("badre", s("[")),
                ],
                &[
                    ("memory", "80Gi"),
                    ("cores", "1500m"),
                    ("other.example.com/slots", "4"),
                ],
                true,
            ),
        ),
        (
            "versioned",
            device(
                "dra.example.com",
                &[("name", A::Version("1.0.0".into()))],
                &[("name", "2Ki")],
                false,
            ),
        ),
        ("driver-a", device("driver-a", &[], &[("capacity-0", "4")], false)),
        (
            "bad-version",
            device(
                "dra.example.com",
                &[("v", A::Version("not-a-version".into()))],
                &[],
                false,
            ),
        ),
    ])
}

fn check(cache: &CelCache, devices: &BTreeMap<&str, CelDevice>, cases: &[(&str, &str, Want, &str)]) {
    for (expression, dev, want, msg) in cases {
        let result = cache
            .selector(expression)
            .and_then(|selector| selector.matches(&devices[dev]));
        let ok = match (&result, want) {
            (Ok(true), True) | (Ok(false), False) => true,
            (Err(CelError::Runtime(e)), Runtime(text)) => e.contains(text),
            (Err(CelError::Compile(e)), Compile(text)) => e.contains(text),
            (Err(CelError::WrongType { expected, got }), WrongType(text)) => {
                *expected == "bool" && got == text
            }
            _ => false,
        };
        assert!(
            ok,
            "{msg}: `{expression}` on {dev}: want {want:?}, got {result:?}"
        );
    }
}

#[test]
fn upstream_selector_expressions() {
    // Every expression quoted in dra-semantics.md §4.2.
    let cases = [
        (
            r#"device.driver == "dra.example.com""#,
            "gpu",
            True,
            "driver matches",
        ),
        (
            r#"device.driver == "dra.example.com""#,
            "driver-a",
            False,
            "driver differs",
        ),
        (
            r#"device.attributes["dra.example.com"].name"#,
            "gpu",
            True,
            "bool attribute",
        ),
        (
            r#"device.attributes["dra.example.com"].name"#,
            "versioned",
            WrongType("kubernetes.Semver"),
            "a version is not a bool",
        ),
        (
            r#"device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
            "versioned",
            True,
            "2Ki > 1Ki",
        ),
        (
            r#"device.capacity["dra.example.com"].name.isGreaterThan(quantity("4Ki"))"#,
            "versioned",
            False,
            "2Ki < 4Ki",
        ),
        (
            r#"device.capacity["driver-a"]["capacity-0"].compareTo(quantity("4")) >= 0"#,
            "driver-a",
            True,
            "4 >= 4",
        ),
        (
            r#"device.capacity["driver-a"]["capacity-0"].compareTo(quantity("5")) >= 0"#,
            "driver-a",
            False,
            "4 < 5",
        ),
        (
            r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))"#,
            "versioned",
            True,
            "version attribute",
        ),
        (
            r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("1.0.1"))"#,
            "versioned",
            False,
            "version attribute, lower",
        ),
        (
            "device.allowMultipleAllocations == true",
            "gpu",
            True,
            "multi-allocatable",
        ),
        (
            "device.allowMultipleAllocations == true",
            "versioned",
            False,
            "not multi-allocatable",
        ),
        (
            r#"cel.bind(dra, device.attributes["dra.example.com"], dra.name)"#,
            "gpu",
            True,
            "cel.bind of a domain",
        ),
    ];
    check(&CelCache::new(), &devices(), &cases);
}

#[test]
fn device_attributes_capacity_and_domains() {
    let cases = [
        (
            r#"device.attributes["unknown.example.com"].name"#,
            "gpu",
            Runtime("No such key: name"),
            "unknown domain is an empty map: missing key is an error",
        ),
        (
            r#""name" in device.attributes["unknown.example.com"]"#,
            "gpu",
            False,
            "unknown domain: `in` is false",
        ),
        (
            r#"size(device.attributes["unknown.example.com"]) == 0"#,
            "gpu",
            True,
            "unknown domain has no entries",
        ),
        (
            r#""unknown.example.com" in device.attributes"#,
            "gpu",
            False,
            "the default map is not a key",
        ),
        (
            r#""other.example.com" in device.attributes && "dra.example.com" in device.attributes"#,
            "gpu",
            True,
            "both domains exist",
        ),
        (
            r#"device.attributes["dra.example.com"].nope"#,
            "gpu",
            Runtime("No such key: nope"),
            "missing id in a known domain",
        ),
        (
            r#"has(device.attributes["dra.example.com"].model) && !has(device.attributes["dra.example.com"].nope)"#,
            "gpu",
            True,
            "has() on attributes",
        ),
        (
            r#"device.attributes["other.example.com"].flag == false"#,
            "gpu",
            True,
            "qualified name in another domain",
        ),
        (
            r#"device.attributes["dra.example.com"].numa == 1"#,
            "gpu",
            True,
            "qualified name in the driver's domain",
        ),
        (
            r#"device.attributes["dra.example.com"].count > 4"#,
            "gpu",
            True,
            "int attribute",
        ),
        (
            r#"device.attributes["dra.example.com"].count.isGreaterThan(quantity("1"))"#,
            "gpu",
            Runtime("isGreaterThan"),
            "an int is not a quantity",
        ),
        (
            r#"device.attributes["dra.example.com"].tags.exists(t, t == "big")"#,
            "gpu",
            True,
            "string list",
        ),
        (
            r#"2 in device.attributes["dra.example.com"].ints"#,
            "gpu",
            True,
            "int list",
        ),
        // KEP-5491's `includes`: membership on a list, equality on a scalar, so one selector
        // serves a driver that publishes either.
        (
            r#"device.attributes["dra.example.com"].tags.includes("big")"#,
            "gpu",
            True,
            "includes on a string list",
        ),
        (
            r#"device.attributes["dra.example.com"].tags.includes("slow")"#,
            "gpu",
            False,
            "includes: not in the list",
        ),
        (
            r#"device.attributes["dra.example.com"].ints.includes(3) && !device.attributes["dra.example.com"].ints.includes(4)"#,
            "gpu",
            True,
            "includes on an int list",
        ),
        (
            r#"device.attributes["dra.example.com"].versions.includes(semver("2.0.0"))"#,
            "gpu",
            True,
            "includes on a version list compares versions",
        ),
        (
            r#"device.attributes["dra.example.com"].model.includes("A100-SXM") && device.attributes["dra.example.com"].count.includes(8)"#,
            "gpu",
            True,
            "includes on scalars is equality",
        ),
        (
            r#"device.attributes["dra.example.com"].model.includes("A100")"#,
            "gpu",
            False,
            "includes on a string scalar is not substring search",
        ),
        (
            r#"[0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8,9,0,1,2,3,4,5,6,7,8].includes(9)"#,
            "gpu",
            Runtime("cannot be applied to lists longer than 48 values"),
            "includes is bounded by the most values an attribute holds",
        ),
        (
            r#"device.attributes["dra.example.com"].ints.all(i, i > 0) && size(device.attributes["dra.example.com"].ints) == 3"#,
            "gpu",
            True,
            "all() over an int list",
        ),
        (
            r#"device.attributes["dra.example.com"].bools.exists_one(b, b)"#,
            "gpu",
            True,
            "bool list",
        ),
        (
            r#"device.attributes["dra.example.com"].versions.exists(v, v.isGreaterThan(semver("1.5.0")))"#,
            "gpu",
            True,
            "version list",
        ),
        (
            r#"device.attributes["dra.example.com"].version.major() == 1 && device.attributes["dra.example.com"].version.minor() == 2 && device.attributes["dra.example.com"].version.patch() == 3"#,
            "gpu",
            True,
            "version components",
        ),
        (
            r#"device.attributes["dra.example.com"].version.isLessThan(semver("1.2.3"))"#,
            "gpu",
            True,
            "a pre-release is lower than its release",
        ),
        (
            r#"device.capacity["dra.example.com"].memory == quantity("80Gi")"#,
            "gpu",
            True,
            "capacity equality",
        ),
        (
            r#"device.capacity["dra.example.com"].memory == quantity("85899345920")"#,
            "gpu",
            True,
            "capacity equality is numeric",
        ),
        (
            r#"device.capacity["dra.example.com"].memory.asInteger() == 85899345920"#,
            "gpu",
            True,
            "asInteger",
        ),
        (
            r#"device.capacity["dra.example.com"].cores.isInteger()"#,
            "gpu",
            False,
            "1500m is not an integer",
        ),
        (
            r#"device.capacity["other.example.com"].slots.compareTo(quantity("4")) == 0"#,
            "gpu",
            True,
            "capacity in another domain",
        ),
        (
            r#"device.capacity["dra.example.com"].memory.add(quantity("1Gi")) == quantity("81Gi")"#,
            "gpu",
            True,
            "capacity arithmetic",
        ),
        (
            r#"device.attributes["dra.example.com"].model.startsWith("A1") && device.attributes["dra.example.com"].model.endsWith("SXM") && device.attributes["dra.example.com"].model.contains("00")"#,
            "gpu",
            True,
            "string functions",
        ),
        (
            r#"device.attributes["dra.example.com"].model.matches("^A[0-9]+-[A-Z]+$")"#,
            "gpu",
            True,
            "matches",
        ),
        (
            r#"device.attributes["dra.example.com"].model.lowerAscii() == "a100-sxm" && device.attributes["dra.example.com"].model.upperAscii() == "A100-SXM""#,
            "gpu",
            True,
            "lowerAscii / upperAscii",
        ),
        (
            r#"device.attributes["dra.example.com"].model.split("-") == ["A100", "SXM"] && ["a", "b"].join("-") == "a-b""#,
            "gpu",
            True,
            "split / join",
        ),
        (
            r#"device.attributes["dra.example.com"].model.replace("-", "_") == "A100_SXM" && device.attributes["dra.example.com"].model.indexOf("-") == 4"#,
            "gpu",
            True,
            "replace / indexOf",
        ),
        (
            r#"device.attributes["dra.example.com"].path.trim() == "/dev/nvidia0" && size(device.attributes["dra.example.com"].model) == 8"#,
            "gpu",
            True,
            "trim / size",
        ),
        (
            r#"device.driver.matches("example")"#,
            "gpu",
            True,
            "matches is unanchored",
        ),
        (
            r#"device.attributes["dra.example.com"].model.matches("[")"#,
            "gpu",
            Compile("invalid regular expression"),
            "a bad constant pattern is a compile error",
        ),
        (
            r#"device.driver.matches(device.attributes["dra.example.com"].badre)"#,
            "gpu",
            Runtime("invalid regular expression \"[\""),
            "a bad computed pattern is a runtime error",
        ),
        (
            r#"device.attributes["dra.example.com"].model.matches("^" + device.attributes["dra.example.com"].model.substring(0, 4) + "-[A-Z]+$")"#,
            "gpu",
            True,
            "a computed pattern, member form",
        ),
        (
            r#"matches(device.driver, device.attributes["dra.example.com"].model)"#,
            "gpu",
            False,
            "a computed pattern, global form, no match",
        ),
        (
            r#"matches(device.attributes["dra.example.com"].model, "^\\p{Lu}[\\p{Nd}]+-" + "\\p{Latin}+$")"#,
            "gpu",
            True,
            "Unicode classes in a computed pattern",
        ),
        (
            r#""٣٤".matches("^\\d+$") || matches("٣٤", "^\\w" + "+$") || "é".matches("\\bé")"#,
            "gpu",
            False,
            "Perl classes and word boundaries are ASCII, as in Go (constant and computed patterns)",
        ),
        (
            r#""34".matches("^\\d+$") && matches("a_1", "^\\w" + "+$") && "xé".matches("\\bé")"#,
            "gpu",
            True,
            "Perl classes and word boundaries on ASCII text",
        ),
        (
            r#"device.attributes["dra.example.com"].model.matches("^\\p{Greek}")"#,
            "gpu",
            False,
            "Unicode scripts in a constant pattern",
        ),
        (
            r#"matches(device.driver, "^dra\\.") && [device.driver].exists(d, d.matches("com$"))"#,
            "gpu",
            True,
            "constant patterns in global calls and loops",
        ),
        (
            r#"device.attributes["dra.example.com"].model"#,
            "gpu",
            WrongType("string"),
            "a selector must return bool",
        ),
        (
            r#"device.driver == "dra.example.com""#,
            "bad-version",
            Runtime("attribute v"),
            "bad version attribute fails every evaluation",
        ),
        ("device.capacity", "gpu", WrongType("map"), "maps are not bools"),
    ];
    check(&CelCache::new(), &devices(), &cases);
}

#[test]
fn quantity_and_semver_libraries() {
    // Standalone expressions, evaluated on any device. Mirrors the Kubernetes library tests.
    let cases = [
        (
            r#"quantity("12Mi") == quantity("12582912")"#,
            "gpu",
            True,
            "parse",
        ),
        (
            r#"quantity("10Mo") == quantity("1")"#,
            "gpu",
            Runtime("invalid quantity"),
            "bad suffix",
        ),
        (
            r#"quantity("Mi") == quantity("0")"#,
            "gpu",
            Runtime("invalid quantity"),
            "suffix alone",
        ),
        (
            r#"isQuantity("20") && isQuantity("20M") && isQuantity("20Mi")"#,
            "gpu",
            True,
            "isQuantity",
        ),
        (
            r#"isQuantity("20Mo") || isQuantity("10Mm") || isQuantity("200K")"#,
            "gpu",
            False,
            "not quantities",
        ),
        (
            r#"quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")"#,
            "gpu",
            True,
            "symmetry",
        ),
        (
            r#"quantity("200M") == quantity("0.3G")"#,
            "gpu",
            False,
            "inequality",
        ),
        (
            r#"quantity("50M").isLessThan(quantity("50Mi"))"#,
            "gpu",
            True,
            "less",
        ),
        (
            r#"quantity("100M").isLessThan(quantity("50M"))"#,
            "gpu",
            False,
            "not less",
        ),
        (
            r#"quantity("50Mi").isGreaterThan(quantity("50M"))"#,
            "gpu",
            True,
            "greater",
        ),
        (
            r#"quantity("200M").compareTo(quantity("0.2G")) == 0"#,
            "gpu",
            True,
            "compare equal",
        ),
        (
            r#"quantity("50M").compareTo(quantity("50Mi")) == -1"#,
            "gpu",
            True,
            "compare less",
        ),
        (
            r#"quantity("50Mi").compareTo(quantity("50M")) == 1"#,
            "gpu",
            True,
            "compare greater",
        ),
        (
            r#"quantity("50k").add(quantity("20")) == quantity("50.02k")"#,
            "gpu",
            True,
            "add quantity",
        ),
        (
            r#"quantity("50k").add(20).isLessThan(quantity("50020"))"#,
            "gpu",
            False,
            "add int",
        ),
        (
            r#"quantity("50k").sub(quantity("20")) == quantity("49.98k")"#,
            "gpu",
            True,
            "sub quantity",
        ),
        (
            r#"quantity("50k").sub(20) == quantity("49980")"#,
            "gpu",
            True,
            "sub int",
        ),
        (
            r#"quantity("50k").mul(2) == quantity("100000")"#,
            "gpu",
            True,
            "mul",
        ),
        (
            r#"quantity("50k").add(20).sub(quantity("100k")).asInteger() == -49980"#,
            "gpu",
            True,
            "chain",
        ),
        (
            r#"quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger() == 20"#,
            "gpu",
            True,
            "chain 2",
        ),
        (
            r#"quantity("50k").asInteger() == 50000 && quantity("50").isInteger()"#,
            "gpu",
            True,
            "asInteger",
        ),
        (
            r#"quantity("12E").asInteger() == 0"#,
            "gpu",
            Runtime("cannot convert value 12E to integer"),
            "asInteger overflow",
        ),
        (
            r#"quantity("12E").isInteger()"#,
            "gpu",
            False,
            "isInteger overflow",
        ),
        (
            r#"quantity("9999999999999999999999999999999999999G").isInteger()"#,
            "gpu",
            Runtime("too large"),
            "beyond the representation",
        ),
        (
            r#"quantity("50.703k").asApproximateFloat() == 50703.0"#,
            "gpu",
            True,
            "asApproximateFloat",
        ),
        (
            r#"quantity("-1").sign() == -1 && sign(quantity("0")) == 0 && quantity("1m").sign() == 1"#,
            "gpu",
            True,
            "sign",
        ),
        (
            r#"quantity("1") < quantity("2")"#,
            "gpu",
            Runtime(""),
            "quantities have no < (use compareTo)",
        ),
        (
            r#"quantity(1) == quantity("1")"#,
            "gpu",
            Runtime("quantity"),
            "quantity() takes a string",
        ),
        (
            r#"semver("1.2.3").compareTo(semver("1.2.3")) == 0"#,
            "gpu",
            True,
            "semver compare equal",
        ),
        (
            r#"semver("1.2.3").compareTo(semver("2.0.0")) == -1"#,
            "gpu",
            True,
            "semver compare less",
        ),
        (
            r#"semver("1.2.3").compareTo(semver("0.1.2")) == 1"#,
            "gpu",
            True,
            "semver compare greater",
        ),
        (
            r#"semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3"#,
            "gpu",
            True,
            "components",
        ),
        (
            r#"semver("v1.0", true) == semver("1.0.0") && semver("01.01.01", true) == semver("1.1.1")"#,
            "gpu",
            True,
            "normalize",
        ),
        (
            r#"semver("1.0.0+a") == semver("1.0.0+b")"#,
            "gpu",
            True,
            "build metadata ignored",
        ),
        (
            r#"semver("v1.0.0") == semver("1.0.0")"#,
            "gpu",
            Runtime("semver"),
            "v prefix needs normalize",
        ),
        (
            r#"isSemver("1.0.0") && !isSemver("hello") && !isSemver("v1.0") && isSemver("v1.0", true)"#,
            "gpu",
            True,
            "isSemver",
        ),
        (
            r#"semver("2.0.0").isGreaterThan(semver("1.9.9")) && semver("1.0.0-alpha").isLessThan(semver("1.0.0"))"#,
            "gpu",
            True,
            "ordering",
        ),
        (
            r#"semver("1.0.0").isGreaterThan(quantity("1"))"#,
            "gpu",
            Runtime("isGreaterThan"),
            "semver vs quantity",
        ),
        (
            r#"cel.bind(x, 2, cel.bind(y, x * 3, y == 6))"#,
            "gpu",
            True,
            "nested cel.bind",
        ),
        (
            r#"cel.bind(device, 1, device == 1)"#,
            "gpu",
            True,
            "cel.bind may shadow device",
        ),
        (
            r#"optional.of(1).optMap(x, x + 1).value() == 2 && !optional.none().optMap(x, x + 1).hasValue()"#,
            "gpu",
            True,
            "optMap maps a value and keeps none",
        ),
        (
            r#"optional.of(2).optFlatMap(x, x > 1 ? optional.of(x * 2) : optional.none()).value() == 4"#,
            "gpu",
            True,
            "optFlatMap returns the optional its body gives",
        ),
        (
            r#"device.attributes["dra.example.com"].?model.optMap(m, m + "!").orValue("") == "A100-SXM!""#,
            "gpu",
            True,
            "optMap on an optional selection (the target bound once)",
        ),
        (
            r#"device.attributes["dra.example.com"].?nosuch.optMap(m, m + "!").orValue("none") == "none""#,
            "gpu",
            True,
            "optMap on an absent attribute",
        ),
        (
            r#"[1, 2, 3].map(x, x * 2) == [2, 4, 6] && [1, 2, 3].filter(x, x > 1) == [2, 3]"#,
            "gpu",
            True,
            "map / filter",
        ),
        (
            r#"[1, 2, 3].map(x, x > 1, x * 10) == [20, 30]"#,
            "gpu",
            True,
            "map with filter",
        ),
        (
            r#"{"a": 1}.exists(k, k == "a")"#,
            "gpu",
            True,
            "comprehension over a map literal",
        ),
        (
            r#""%s-%d".format(["a", 1]) == "a-1""#,
            "gpu",
            True,
            "format (strings extension)",
        ),
        (
            r#""abc".charAt(1) == "b" && "abc".substring(1) == "bc" && "abc".lastIndexOf("c") == 2"#,
            "gpu",
            True,
            "more string functions",
        ),
    ];
    check(&CelCache::new(), &devices(), &cases);
}

#[test]
fn compile_errors_are_reported_and_cached() {
    let cases = [
        (r#"device.driver =="#, "gpu", Compile("ERROR"), "syntax error"),
        (
            r#"devce.driver == "x""#,
            "gpu",
            Compile("undeclared reference to 'devce'"),
            "typo in the variable",
        ),
        (
            r#"object.x == "x""#,
            "gpu",
            Compile("undeclared reference to 'object'"),
            "extractor variable in a selector",
        ),
        (
            r#"device.foo == 1"#,
            "gpu",
            Compile("undefined field 'foo'"),
            "unknown device field",
        ),
        (
            r#"has(device.foo)"#,
            "gpu",
            Compile("undefined field 'foo'"),
            "unknown device field in has()",
        ),
        (
            r#"nosuchfn(1)"#,
            "gpu",
            Compile("function 'nosuchfn'"),
            "unknown function",
        ),
        (
            r#"device.driver.nosuch()"#,
            "gpu",
            Compile("member function 'nosuch'"),
            "unknown member function",
        ),
        (
            r#"quantity("1").isQuantity()"#,
            "gpu",
            Compile("member function 'isQuantity'"),
            "global function called as member",
        ),
        (
            r#"cel.bind(a.b, 1, true)"#,
            "gpu",
            Compile("simple identifier"),
            "bind needs an identifier",
        ),
        (
            r#"math.greatest(1, 2) == 2"#,
            "gpu",
            Compile("undeclared reference to 'math'"),
            "no math extension",
        ),
        (
            r#"[1].all(x, y > 0)"#,
            "gpu",
            Compile("undeclared reference to 'y'"),
            "unbound name in a comprehension",
        ),
        (
            r#"Foo{a: 1}"#,
            "gpu",
            Compile("unknown type Foo"),
            "no message types",
        ),
        (
            r#"type(device.driver) == string && strings.quote("a") == "\"a\"""#,
            "gpu",
            True,
            "type names and namespaced functions are declared",
        ),
    ];
    let cache = CelCache::new();
    check(&cache, &devices(), &cases);
    let first = cache.selector("device.foo").err();
    assert!(matches!(first, Some(CelError::Compile(_))), "{first:?}");
    assert_eq!(
        cache.selector("device.foo").err(),
        first,
        "the error is returned again"
    );
    assert!(
        matches!(
            cache.selectors.lock().unwrap().get("device.foo"),
            Some(Err(CelError::Compile(_)))
        ),
        "and kept in the cache"
    );
    let a = cache.selector("device.driver == \"x\"").unwrap();
    let b = cache.selector("device.driver == \"x\"").unwrap();
    assert!(Arc::ptr_eq(&a, &b), "compiled once, shared");
}

#[test]
fn extractors_read_the_object() {
    let object = CelObject::from_json(
        r#"{
        "spec": {"network": {"subnet": "10.0.0.0/24", "vlan": 7}},
        "count": 3,
        "big": 18446744073709551615,
        "ratio": 0.5,
        "labels": ["a", "b"],
        "none": null,
        "edge": 9333333000000629387372,
        "twice": "first", "twice": "last"
    }"#,
    )
    .unwrap();
    let cache = CelCache::new();
    let cases: &[(&str, Result<&str, &str>, &str)] = &[
        ("object.spec.network.subnet", Ok("10.0.0.0/24"), "nested field"),
        (
            r#"object.spec.network.subnet.split("/")[0]"#,
            Ok("10.0.0.0"),
            "string functions",
        ),
        (r#"has(object.spec.x) ? "set" : "unset""#, Ok("unset"), "has()"),
        ("string(object.count)", Ok("3"), "int to string"),
        (r#"object.labels.join(",")"#, Ok("a,b"), "join a list"),
        (
            r#"object.big > 0u ? "uint" : "int""#,
            Ok("uint"),
            "numbers above i64 are uint",
        ),
        (
            r#"object.ratio == 0.5 && object.none == null ? "ok" : "no""#,
            Ok("ok"),
            "doubles and null",
        ),
        (
            r#"object.edge == 9333333000000629387372.0 ? "nearest double" : string(object.edge)"#,
            Ok("nearest double"),
            "a number read exactly, as Go reads it",
        ),
        ("object.twice", Ok("last"), "the last of a repeated key"),
        (
            r#"cel.bind(n, object.spec.network, n.subnet + "/" + string(n.vlan))"#,
            Ok("10.0.0.0/24/7"),
            "cel.bind",
        ),
        ("object.count", Err("int"), "an extractor must return a string"),
        ("object.spec", Err("map"), "a map is not a string"),
        ("object.missing", Err("No such key: missing"), "missing field"),
        (
            "device.driver",
            Err("undeclared reference to 'device'"),
            "selector variable in an extractor",
        ),
    ];
    for (expression, want, msg) in cases {
        let got = cache.extractor(expression).and_then(|e| e.extract(&object));
        match (&got, want) {
            (Ok(s), Ok(w)) => assert_eq!(s, w, "{msg}"),
            (Err(CelError::WrongType { expected, got }), Err(w)) => {
                assert_eq!((*expected, got.as_str()), ("string", *w), "{msg}")
            }
            (Err(CelError::Runtime(e) | CelError::Compile(e)), Err(w)) => {
                assert!(e.contains(w), "{msg}: {e}")
            }
            _ => panic!("{msg}: `{expression}` gave {got:?}, want {want:?}"),
        }
    }
}

/// `[0, 1, ..., n-1]` as CEL source.
fn list(n: usize) -> String {
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// `depth` nested `all()` comprehensions over a list of `n` elements: `n^depth` iterations.
fn nested_all(n: usize, depth: usize) -> String {
    let l = list(n);
    let mut expr = "true".to_owned();
    for d in (0..depth).rev() {
        expr = format!("{l}.all(x{d}, {expr})");
    }
    expr
}

#[test]
fn cost_budget_bounds_every_evaluation() {
    let cache = CelCache::new();
    let devices = devices();
    let gpu = &devices["gpu"];
    let over = "cost budget exceeded";
    let eval = |expr: &str| cache.selector(expr).and_then(|s| s.matches(gpu));

    // 20^3 = 8,000 innermost iterations: well within 1,000,000.
    assert_eq!(
        eval(&nested_all(20, 3)),
        Ok(true),
        "small nested comprehensions pass"
    );
    // 20^6 = 64,000,000 iterations would cost far more than 1,000,000: stopped early.
    let big = nested_all(20, 6);
    match eval(&big) {
        Err(CelError::Runtime(e)) => assert!(e.contains(over), "{e}"),
        other => panic!("nested comprehensions must exceed the budget: {other:?}"),
    }
    // An error CEL would absorb (`error || true`) does not hide the budget.
    match eval(&format!("({big}) || true")) {
        Err(CelError::Runtime(e)) => assert!(e.contains(over), "{e}"),
        other => panic!("`|| true` must not absorb the budget error: {other:?}"),
    }
    // map() keeps its in-place shape and is charged per element.
    let maps = format!(
        "{l}.map(a, {l}.map(b, {l}.map(c, {l}.map(d, a + b + c + d)))).size() > 0",
        l = list(40)
    );
    match eval(&maps) {
        Err(CelError::Runtime(e)) => assert!(e.contains(over), "{e}"),
        other => panic!("nested map() must exceed the budget: {other:?}"),
    }
    // Doubling a 10-byte string 22 times would build 40 MB strings: the size charges of `+`
    // stop it at a few MB. (22 nested binds stay within the nesting limits; debug builds parse
    // them with more stack than a test thread has, hence the thread.)
    let doubling = |levels: usize| {
        let mut e = "s0.size() > 0".to_owned();
        for i in (0..levels).rev() {
            let init = if i == 0 {
                r#""xxxxxxxxxx""#.to_owned()
            } else {
                format!("s{} + s{}", i - 1, i - 1)
            };
            e = format!("cel.bind(s{i}, {init}, {e})");
        }
        e
    };
    let run = |expr: String| {
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(move || {
                let all = super::tests::devices();
                CelCache::new()
                    .selector(&expr)
                    .and_then(|s| s.matches(&all["gpu"]))
            })
            .unwrap()
            .join()
            .unwrap()
    };
    match run(doubling(22)) {
        Err(CelError::Runtime(e)) => assert!(e.contains(over), "{e}"),
        other => panic!("string doubling must exceed the budget: {other:?}"),
    }
    // Doubling 10 times (10 KB) is fine.
    assert_eq!(run(doubling(10)), Ok(true), "moderate string building passes");
}

#[test]
fn nesting_limits_reject_before_parsing_and_admit_up_to_the_limit() {
    let cache = CelCache::new();
    let count = r#"device.attributes["dra.example.com"].count"#;
    let too_long = format!("{} > 0", vec![count; 70].join(" + "));
    match cache.selector(&too_long) {
        Err(CelError::Compile(e)) => assert!(e.contains("at most 64"), "{e}"),
        other => panic!("a 70-term chain must be rejected: {:?}", other.err()),
    }
    let too_deep = format!("{}1{} == 1", "[".repeat(30), "]".repeat(30));
    match cache.selector(&too_deep) {
        Err(CelError::Compile(e)) => assert!(e.contains("more than 24 deep"), "{e}"),
        other => panic!("30 nested lists must be rejected: {:?}", other.err()),
    }
    // The largest accepted shapes compile and run (in release they need < 256 KiB of stack;
    // debug builds need far more, hence the thread).
    let accepted = vec![
        (format!("{} > 0", vec![count; 60].join(" + ")), true),
        (format!("{}1{} == 1", "[".repeat(24), "]".repeat(24)), false),
        (
            format!(
                "{}{}{} == 1",
                "[".repeat(20),
                vec![count; 38].join(" + "),
                "]".repeat(20)
            ),
            false,
        ),
    ];
    let results = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let devices = devices();
            let cache = CelCache::new();
            accepted
                .into_iter()
                .map(|(e, want)| (cache.selector(&e).and_then(|s| s.matches(&devices["gpu"])), want))
                .collect::<Vec<_>>()
        })
        .unwrap()
        .join()
        .unwrap();
    for (i, (got, want)) in results.into_iter().enumerate() {
        assert_eq!(got, Ok(want), "accepted shape #{i}");
    }
}

#[test]
fn cost_limit_is_configurable_and_counts_static_and_loop_costs() {
    let devices = devices();
    let gpu = &devices["gpu"];
    let eval = |limit: u64, expr: &str| {
        CelCache::with_cost_limit(limit)
            .selector(expr)
            .and_then(|s| s.matches(gpu))
    };
    let simple = r#"device.driver == "dra.example.com""#;
    // `device.driver`: ident 1 + select 1; `==` with a 15-byte literal: ceil(1.5) = 2.
    let static_cost = compile::compile(&library::environment(), simple, Root::Device)
        .unwrap()
        .static_cost();
    assert_eq!(static_cost, 4, "static cost of a simple selector");
    assert_eq!(eval(4, simple), Ok(true), "exactly at the limit");
    assert!(
        matches!(eval(3, simple), Err(CelError::Runtime(e)) if e.contains("cost budget")),
        "static cost over the limit"
    );
    // 100 iterations cost at least 100 more.
    let loop_expr = format!("{}.all(x, x >= 0)", list(100));
    assert_eq!(
        eval(1_000, &loop_expr),
        Ok(true),
        "100 cheap iterations fit in 1000"
    );
    assert!(
        matches!(eval(100, &loop_expr), Err(CelError::Runtime(e)) if e.contains("cost budget")),
        "but not in 100"
    );
}

#[test]
fn shared_types_are_thread_safe() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<CelCache>();
    send_sync::<Selector>();
    send_sync::<Extractor>();
    send_sync::<CelDevice>();
    send_sync::<CelObject>();
    send_sync::<CelError>();
}

#[test]
fn cache_starts_over_when_full() {
    let cache = CelCache::new();
    for i in 0..CACHE_CAPACITY {
        cache.selector(&format!("device.driver == \"{i}\"")).unwrap();
    }
    assert_eq!(cache.selectors.lock().unwrap().len(), CACHE_CAPACITY);
    cache.selector("device.driver == \"one more\"").unwrap();
    assert_eq!(
        cache.selectors.lock().unwrap().len(),
        1,
        "cleared, then the new entry"
    );
    cache.extractor("object.a").unwrap();
    assert_eq!(
        cache.extractors.lock().unwrap().len(),
        1,
        "extractors are cached separately"
    );
}

/// The smallest cost limit under which `expression` evaluates without a budget error.
fn min_limit(expression: &str) -> u64 {
    let devices = devices();
    let fits = |limit: u64| {
        !matches!(
            CelCache::with_cost_limit(limit)
                .selector(expression)
                .and_then(|s| s.matches(&devices["gpu"])),
            Err(CelError::Runtime(e)) if e.contains("cost budget")
        )
    };
    let (mut low, mut high) = (0, 100_000);
    assert!(fits(high), "{expression} costs more than {high}");
    while low < high {
        let mid = (low + high) / 2;
        if fits(mid) { high = mid } else { low = mid + 1 }
    }
    low
}

#[test]
fn loops_are_charged_per_iteration() {
    // For each comprehension shape, one more element adds the same cost every time.
    let shapes: &[(&str, &str)] = &[
        ("{}.all(x, x >= 0)", "all (condition charged)"),
        ("{}.exists(x, x < 0)", "exists"),
        ("{}.exists_one(x, x == 0)", "exists_one"),
        (
            "size({}.map(x, x * 2)) > 0",
            "map (element charged, in-place shape kept)",
        ),
        ("size({}.filter(x, x > 0)) >= 0", "filter (predicate charged)"),
        ("size({}.map(x, x > 0, x)) >= 0", "map with a filter"),
    ];
    for (shape, msg) in shapes {
        let costs: Vec<u64> = [10, 20, 30]
            .iter()
            .map(|&n| min_limit(&shape.replace("{}", &list(n))))
            .collect();
        let step = costs[1] - costs[0];
        assert!(
            step >= 10,
            "{msg}: 10 more iterations cost at least 10 more ({costs:?})"
        );
        assert_eq!(
            costs[2] - costs[1],
            step,
            "{msg}: linear in the iterations ({costs:?})"
        );
    }
    // Copies are charged by size: binding a 100-byte string costs more than binding 1 byte.
    let short = min_limit(r#"cel.bind(s, "x" + "", size(s) > 0)"#);
    let long = min_limit(&format!(
        r#"cel.bind(s, "{}" + "", size(s) > 0)"#,
        "x".repeat(100)
    ));
    assert!(
        long >= short + 10,
        "concatenation is charged by size: {short} vs {long}"
    );
    // Binding a shared device map costs the same whatever its size.
    let small = min_limit(r#"cel.bind(d, device.attributes["other.example.com"], size(d) > 0)"#);
    let large = min_limit(r#"cel.bind(d, device.attributes["dra.example.com"], size(d) > 0)"#);
    assert_eq!(small, large, "device maps are shared, not copied");
}

/// A device prepared from borrowed entries in any order reads as one prepared from sorted maps;
/// a name given twice keeps its last value, also when the short and the qualified form of the
/// driver's domain meet (the qualified form sorts first, so the short one wins, as in a map).
#[test]
fn devices_prepared_from_entries_in_any_order() {
    let s = |v: &str| A::String(v.into());
    let (model, qualified, numa, flag) = (s("A100"), s("H100"), A::Int(1), A::Bool(true));
    let (mem, cores) = (q("80Gi"), q("16"));
    let shuffled = CelDevice::from_entries(
        "dra.example.com",
        [
            ("other.example.com/flag", &flag),
            ("model", &model),
            ("dra.example.com/numa", &numa),
            ("dra.example.com/model", &qualified),
            ("model", &model),
        ],
        [("memory", &mem), ("other.example.com/cores", &cores)],
        true,
    );
    let sorted = device(
        "dra.example.com",
        &[
            ("dra.example.com/model", qualified.clone()),
            ("dra.example.com/numa", numa.clone()),
            ("model", model.clone()),
            ("other.example.com/flag", flag.clone()),
        ],
        &[("memory", "80Gi"), ("other.example.com/cores", "16")],
        true,
    );
    let devices = BTreeMap::from([("shuffled", shuffled), ("sorted", sorted)]);
    let cases: Vec<(&str, &str, Want, &str)> = ["shuffled", "sorted"]
        .into_iter()
        .flat_map(|d| {
            [
                (
                    r#"device.attributes["dra.example.com"].model == "A100" && device.attributes["dra.example.com"].numa == 1"#,
                    d,
                    True,
                    "the driver's domain, short name last",
                ),
                (
                    r#"device.attributes["other.example.com"].flag && device.capacity["other.example.com"].cores.compareTo(quantity("16")) == 0"#,
                    d,
                    True,
                    "another domain",
                ),
                (
                    r#"device.capacity["dra.example.com"].memory.isGreaterThan(quantity("64Gi")) && device.allowMultipleAllocations"#,
                    d,
                    True,
                    "capacity in the driver's domain",
                ),
                (
                    r#"size(device.attributes["dra.example.com"]) == 2 && !("flag" in device.attributes["dra.example.com"]) && size(device.attributes["none.example.com"]) == 0"#,
                    d,
                    True,
                    "each domain holds its own names; an unknown domain is empty",
                ),
            ]
        })
        .collect();
    check(&CelCache::new(), &devices, &cases);
}
