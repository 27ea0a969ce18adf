//! Kubernetes resource quantities (`"80Gi"`, `"1500m"`, `"1e3"`), parsed and compared exactly.
//!
//! A [`Quantity`] holds its value as an `i128` count of nano-units together with the
//! [`Format`] it was written in, as `k8s.io/apimachinery`'s `resource.Quantity` does with its
//! fixed-point amount. No floating point is involved anywhere except
//! [`Quantity::as_approximate_f64`].
//!
//! Behaviour follows `resource.ParseQuantity` and `Quantity.String()`:
//! - Accepted: an optional sign, decimal digits with an optional fraction (`1`, `1.5`, `.5`, `1.`),
//!   then one suffix: binary SI (`Ki` … `Ei`), decimal SI (`n u m "" k M G T P E`) or a decimal
//!   exponent (`e3`, `E-3`, `e+6`, at most ±2³¹−1).
//! - Values finer than a nano-unit are rounded up (away from zero) to the next nano-unit, so any
//!   non-zero request stays non-zero (`0.1n` is `1n`).
//! - Binary-SI values above 2⁶³−1 units are capped at 2⁶³−1 units, as upstream caps them; other
//!   values that do not fit the `i128` nano-unit representation (about ±1.7·10²⁹ units) are rejected
//!   as "too large" (upstream keeps them as arbitrary-precision decimals).
//! - The canonical form ([`fmt::Display`]) keeps the format, uses the largest suffix that loses no
//!   precision and never prints a fraction: `1.5Gi` is `1536Mi`, `0.5` is `500m`, `1000k` is `1M`.
//!   Binary-SI values in (−1024, 1024) or with a fraction print in decimal SI; past `Ei` both
//!   formats fall back to exponent notation (`1e21`) or plain digits.
//!
//! Known deviations from the Go scanner: text without any digit (`"."`, `"-"`, `"Mi"`) is rejected,
//! as the documented grammar and the CEL library's `quantity('Mi')` example say, whereas Go's
//! scanner happens to read it as zero.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

/// Nano-units per unit.
const NANO: u128 = 1_000_000_000;
/// `2^63 - 1` units in nano-units: the cap upstream applies to parsed binary-SI values.
const MAX_BINARY_SI_NANOS: i128 = i64::MAX as i128 * NANO as i128;

/// How a quantity is written; kept from parsing and used to print it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `12e6`: a decimal mantissa and exponent.
    DecimalExponent,
    /// `12Mi`: powers of 1024.
    BinarySI,
    /// `12M`: powers of 1000.
    DecimalSI,
}

/// A Kubernetes quantity, exact to the nano unit, with the format it was written in.
///
/// Equality, ordering and hashing are numeric (`1Gi == 1073741824`); the format only affects
/// how the quantity prints.
#[derive(Clone, Debug)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

/// A quantity that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {text:?}: {reason}")]
pub struct QuantityError {
    /// The text that failed.
    pub text: String,
    /// Why it failed.
    pub reason: String,
}

impl QuantityError {
    fn new(text: &str, reason: impl Into<String>) -> Self {
        QuantityError {
            text: text.to_owned(),
            reason: reason.into(),
        }
    }
}

impl Quantity {
    /// The value as an integer, rounded up away from zero (Go `Quantity.Value()`); saturates at
    /// the `i64` bounds.
    pub fn value(&self) -> i64 {
        self.scaled_ceil(NANO)
    }

    /// The value in thousandths, rounded up away from zero (Go `Quantity.MilliValue()`);
    /// saturates at the `i64` bounds.
    pub fn milli_value(&self) -> i64 {
        self.scaled_ceil(NANO / 1000)
    }

    /// A quantity of `v` units in binary-SI format (Go `resource.NewQuantity(v, BinarySI)`).
    pub fn from_i64(v: i64) -> Self {
        Quantity::new(v, Format::BinarySI)
    }

    /// A quantity of `v` units in the given format (Go `resource.NewQuantity(v, format)`).
    pub fn new(v: i64, format: Format) -> Self {
        Quantity {
            nanos: v as i128 * NANO as i128,
            format,
        }
    }

    /// A quantity of `v` thousandths in decimal-SI format (Go `NewMilliQuantity(v, DecimalSI)`).
    pub fn from_milli(v: i64) -> Self {
        Quantity {
            nanos: v as i128 * (NANO / 1000) as i128,
            format: Format::DecimalSI,
        }
    }

    /// A quantity of `nanos` nano-units in the given format.
    pub fn from_nanos(nanos: i128, format: Format) -> Self {
        Quantity { nanos, format }
    }

    /// The exact value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The format the quantity prints in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Equal and printed the same: the same value in the same format (`==` compares values
    /// only: `2Ki == 2048`, but they print differently).
    pub fn identical(&self, other: &Quantity) -> bool {
        self.nanos == other.nanos && self.format == other.format
    }

    /// The same value printed in another format.
    pub fn with_format(self, format: Format) -> Self {
        Quantity { format, ..self }
    }

    /// Exact sum. The result keeps `self`'s format, or takes `other`'s when `self` is zero (as
    /// Go's `Quantity.Add`); `None` when the sum does not fit.
    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        Some(Quantity {
            nanos: self.nanos.checked_add(other.nanos)?,
            format: self.arithmetic_format(other),
        })
    }

    /// Exact difference, formatted like [`Quantity::checked_add`]; `None` when it does not fit.
    pub fn checked_sub(&self, other: &Quantity) -> Option<Quantity> {
        Some(Quantity {
            nanos: self.nanos.checked_sub(other.nanos)?,
            format: self.arithmetic_format(other),
        })
    }

    /// Exact product with an integer, keeping the format (Go `Quantity.Mul`); `None` on overflow.
    pub fn checked_mul(&self, factor: i64) -> Option<Quantity> {
        Some(Quantity {
            nanos: self.nanos.checked_mul(factor as i128)?,
            format: self.format,
        })
    }

    /// Whether the quantity is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// `-1`, `0` or `1` (Go `Quantity.Sign()`).
    pub fn sign(&self) -> i64 {
        self.nanos.signum() as i64
    }

    /// The value as an `i64` when it is a whole number that fits, otherwise `None`.
    pub fn as_i64(&self) -> Option<i64> {
        if self.nanos % NANO as i128 != 0 {
            return None;
        }
        i64::try_from(self.nanos / NANO as i128).ok()
    }

    /// The value as a float, possibly rounded (Go `AsApproximateFloat64`).
    pub fn as_approximate_f64(&self) -> f64 {
        if self.nanos % NANO as i128 == 0 {
            (self.nanos / NANO as i128) as f64
        } else {
            self.nanos as f64 / NANO as f64
        }
    }

    fn arithmetic_format(&self, other: &Quantity) -> Format {
        if self.nanos == 0 {
            other.format
        } else {
            self.format
        }
    }

    /// `ceil(|nanos| / unit)` with the sign of the value, saturated to `i64`.
    fn scaled_ceil(&self, unit: u128) -> i64 {
        let magnitude = self.nanos.unsigned_abs().div_ceil(unit);
        if self.nanos < 0 {
            i64::try_from(magnitude).map_or(i64::MIN, |m| -m)
        } else {
            i64::try_from(magnitude).unwrap_or(i64::MAX)
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Quantity {}
impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.nanos.cmp(&other.nanos)
    }
}
impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

/// What a suffix means: `value * 10^exp10 * 2^exp2`.
struct Suffix {
    exp10: i64,
    exp2: u32,
    format: Format,
}

fn interpret_suffix(suffix: &str) -> Option<Suffix> {
    let decimal = |exp10| Suffix {
        exp10,
        exp2: 0,
        format: Format::DecimalSI,
    };
    let binary = |exp2| Suffix {
        exp10: 0,
        exp2,
        format: Format::BinarySI,
    };
    Some(match suffix {
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            // A decimal exponent: `e` or `E`, an optional sign and at least one digit, within
            // the int32 range upstream stores it in.
            let rest = suffix.strip_prefix(['e', 'E'])?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let exp: i64 = rest.parse().ok()?;
            if exp.unsigned_abs() > i32::MAX as u64 {
                return None;
            }
            Suffix {
                exp10: exp,
                exp2: 0,
                format: Format::DecimalExponent,
            }
        }
    })
}

/// `digits` (big-endian decimal, no leading zeros) times `factor`.
fn multiply_digits(digits: &[u8], factor: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(digits.len() + 20);
    let mut carry: u128 = 0;
    for &d in digits.iter().rev() {
        let cur = d as u128 * factor as u128 + carry;
        out.push((cur % 10) as u8);
        carry = cur / 10;
    }
    while carry > 0 {
        out.push((carry % 10) as u8);
        carry /= 10;
    }
    out.reverse();
    out
}

/// The decimal digits as an integer, `None` when it does not fit `i128`.
fn digits_to_i128(digits: &[u8]) -> Option<i128> {
    digits
        .iter()
        .try_fold(0i128, |acc, &d| acc.checked_mul(10)?.checked_add(d as i128))
}

/// `ceil(digits * 10^shift)` as an integer, `None` when it does not fit `i128`.
fn shift_ceil(digits: &[u8], shift: i64) -> Option<i128> {
    if digits.is_empty() {
        return Some(0);
    }
    if shift >= 0 {
        // i128::MAX has 39 digits: anything longer cannot fit.
        if digits.len() as i64 + shift > 39 {
            return None;
        }
        let base = digits_to_i128(digits)?;
        (0..shift).try_fold(base, |acc, _| acc.checked_mul(10))
    } else {
        let drop = shift.unsigned_abs();
        if drop >= digits.len() as u64 {
            // Only a (non-zero) fraction is left: round up to one nano-unit.
            return Some(1);
        }
        let keep = digits.len() - drop as usize;
        let whole = digits_to_i128(&digits[..keep])?;
        let round_up = digits[keep..].iter().any(|&d| d != 0);
        whole.checked_add(round_up as i128)
    }
}

fn parse_quantity(text: &str) -> Result<Quantity, QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::new(text, "empty string"));
    }
    if text == "0" {
        return Ok(Quantity {
            nanos: 0,
            format: Format::DecimalSI,
        });
    }
    let bytes = text.as_bytes();
    let mut pos = 0;
    let negative = match bytes[0] {
        b'-' => {
            pos = 1;
            true
        }
        b'+' => {
            pos = 1;
            false
        }
        _ => false,
    };
    let digits_end = |mut p: usize| {
        while p < bytes.len() && bytes[p].is_ascii_digit() {
            p += 1;
        }
        p
    };
    let int_end = digits_end(pos);
    let int_part = &text[pos..int_end];
    pos = int_end;
    let mut frac_part = "";
    if pos < bytes.len() && bytes[pos] == b'.' {
        let frac_end = digits_end(pos + 1);
        frac_part = &text[pos + 1..frac_end];
        pos = frac_end;
    }
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(QuantityError::new(
            text,
            "expected a number (digits with an optional fraction) before the suffix",
        ));
    }
    let suffix_text = &text[pos..];
    let suffix = interpret_suffix(suffix_text).ok_or_else(|| {
        QuantityError::new(
            text,
            format!(
                "unknown suffix {suffix_text:?} (expected one of Ki Mi Gi Ti Pi Ei, n u m k M G T P E, \
                 or a decimal exponent such as e3)"
            ),
        )
    })?;

    // value = digits * 10^(exp10 - len(frac)) * 2^exp2
    let mut digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|b| b - b'0')
        .skip_while(|&d| d == 0)
        .collect();
    if suffix.exp2 > 0 && !digits.is_empty() {
        digits = multiply_digits(&digits, 1u64 << suffix.exp2);
    }
    let shift = suffix.exp10 - frac_part.len() as i64 + 9;
    let mut format = suffix.format;
    let magnitude = match shift_ceil(&digits, shift) {
        Some(m) if format == Format::BinarySI => m.min(MAX_BINARY_SI_NANOS),
        Some(m) => m,
        None if format == Format::BinarySI => MAX_BINARY_SI_NANOS,
        None => {
            return Err(QuantityError::new(
                text,
                "too large (more than about 1.7e29 units)",
            ));
        }
    };
    if format == Format::BinarySI && magnitude > 0 && magnitude < NANO as i128 {
        // Upstream switches fractions of one unit to decimal SI to avoid rounding.
        format = Format::DecimalSI;
    }
    Ok(Quantity {
        nanos: if negative { -magnitude } else { magnitude },
        format,
    })
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_quantity(s)
    }
}

const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

fn decimal_si_suffix(exp: i64) -> Option<&'static str> {
    Some(match exp {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return None,
    })
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let sign = if self.nanos < 0 { "-" } else { "" };
        let magnitude = self.nanos.unsigned_abs();
        let mut format = self.format;
        if format == Format::BinarySI {
            if magnitude < 1024 * NANO || !magnitude.is_multiple_of(NANO) {
                // Small or fractional binary values print in decimal SI so nothing is rounded.
                format = Format::DecimalSI;
            } else {
                let mut units = magnitude / NANO;
                let mut exp = 0;
                while units.is_multiple_of(1024) {
                    units /= 1024;
                    exp += 1;
                }
                match BINARY_SUFFIXES.get(exp) {
                    Some(suffix) => return write!(f, "{sign}{units}{suffix}"),
                    // Past `Ei` there is no binary suffix: fall back to decimal.
                    None => format = Format::DecimalSI,
                }
            }
        }
        // Decimal canonical form: strip factors of ten, then lower the exponent to a multiple
        // of three.
        let mut mantissa = magnitude;
        let mut exp: i64 = -9;
        while mantissa.is_multiple_of(10) {
            mantissa /= 10;
            exp += 1;
        }
        let adjust = exp.rem_euclid(3);
        mantissa *= 10u128.pow(adjust as u32);
        exp -= adjust;
        match format {
            Format::DecimalSI => match decimal_si_suffix(exp) {
                Some(suffix) => write!(f, "{sign}{mantissa}{suffix}"),
                None => write!(f, "{sign}{mantissa}e{exp}"),
            },
            _ if exp == 0 => write!(f, "{sign}{mantissa}"),
            _ => write!(f, "{sign}{mantissa}e{exp}"),
        }
    }
}

impl serde::Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Accepts a JSON string (surrounding spaces trimmed, as Go's `UnmarshalJSON` does) or a JSON
/// number. `null` is refused, where Go reads a zero quantity: docs/CONFORMANCE.md, "Kubernetes
/// JSON". Integers are exact; other numbers go through their shortest decimal form, so an
/// exponent written in the JSON number is not kept as the format.
impl<'de> serde::Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity string (e.g. \"80Gi\") or number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                v.trim().parse().map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity::new(v, Format::DecimalSI))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity {
                    nanos: v as i128 * NANO as i128,
                    format: Format::DecimalSI,
                })
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Quantity, E> {
                if !v.is_finite() {
                    return Err(E::custom(format!("invalid quantity {v}: not a finite number")));
                }
                v.to_string().parse().map_err(E::custom)
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        s.parse().unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    #[test]
    fn parses_valid_quantities_exactly() {
        // (input, value in nano-units, format, message)
        let gi = 1i128 << 30;
        let n = NANO as i128;
        let cases: &[(&str, i128, Format, &str)] = &[
            ("0", 0, Format::DecimalSI, "plain zero is decimal SI"),
            ("0Ki", 0, Format::BinarySI, "zero keeps a binary suffix's format"),
            ("-0", 0, Format::DecimalSI, "negative zero"),
            ("1", n, Format::DecimalSI, "no suffix"),
            ("+1", n, Format::DecimalSI, "explicit plus sign"),
            ("-1", -n, Format::DecimalSI, "minus sign"),
            ("007", 7 * n, Format::DecimalSI, "leading zeros"),
            ("1Ki", 1024 * n, Format::BinarySI, "Ki"),
            ("7Mi", 7 * (1 << 20) * n, Format::BinarySI, "Mi"),
            ("1Gi", gi * n, Format::BinarySI, "Gi"),
            ("5Ti", 5 * (1i128 << 40) * n, Format::BinarySI, "Ti"),
            ("4Pi", 4 * (1i128 << 50) * n, Format::BinarySI, "Pi"),
            ("3Ei", 3 * (1i128 << 60) * n, Format::BinarySI, "Ei"),
            (
                "1.5Gi",
                1536 * (1 << 20) * n,
                Format::BinarySI,
                "fractional binary",
            ),
            (
                "100.035Ki",
                102_435_840_000_000,
                Format::BinarySI,
                "fraction of Ki",
            ),
            ("5n", 5, Format::DecimalSI, "nano"),
            ("4u", 4_000, Format::DecimalSI, "micro"),
            ("3m", 3_000_000, Format::DecimalSI, "milli"),
            ("8k", 8_000 * n, Format::DecimalSI, "kilo"),
            ("7M", 7_000_000 * n, Format::DecimalSI, "mega"),
            ("6G", 6_000_000_000 * n, Format::DecimalSI, "giga"),
            ("5T", 5 * 10i128.pow(12) * n, Format::DecimalSI, "tera"),
            ("2P", 2 * 10i128.pow(15) * n, Format::DecimalSI, "peta"),
            (
                "1E",
                10i128.pow(18) * n,
                Format::DecimalSI,
                "exa (not an exponent)",
            ),
            (
                "12E",
                12 * 10i128.pow(18) * n,
                Format::DecimalSI,
                "beyond int64 is kept exactly",
            ),
            ("1e3", 1000 * n, Format::DecimalExponent, "lower-case exponent"),
            (
                "1E-3",
                1_000_000,
                Format::DecimalExponent,
                "upper-case negative exponent",
            ),
            (
                "12e+6",
                12_000_000 * n,
                Format::DecimalExponent,
                "exponent with plus sign",
            ),
            (
                "1.3E+6",
                1_300_000 * n,
                Format::DecimalExponent,
                "fraction and exponent",
            ),
            (
                "0.5e-2",
                5_000_000,
                Format::DecimalExponent,
                "fraction, negative exponent",
            ),
            ("0.5", 500_000_000, Format::DecimalSI, "fraction without suffix"),
            (
                ".5",
                500_000_000,
                Format::DecimalSI,
                "fraction without integer part",
            ),
            ("1.", n, Format::DecimalSI, "trailing dot"),
            (
                "1.G",
                10i128.pow(9) * n,
                Format::DecimalSI,
                "trailing dot before suffix",
            ),
            ("100.035k", 100_035 * n, Format::DecimalSI, "fraction of k"),
            ("3.001n", 4, Format::DecimalSI, "sub-nano fraction rounds up"),
            (
                "0.0000000001",
                1,
                Format::DecimalSI,
                "below one nano rounds up to 1n",
            ),
            ("0.9n", 1, Format::DecimalSI, "0.9n rounds up"),
            ("0.00000012345", 124, Format::DecimalSI, "rounds up, not half-up"),
            ("-0.1n", -1, Format::DecimalSI, "negative rounds away from zero"),
            (
                "1.1E-9",
                2,
                Format::DecimalExponent,
                "exponent form rounds up too",
            ),
            (
                ".001Ki",
                1_024_000_000,
                Format::BinarySI,
                "1.024 is at least one unit",
            ),
            (
                "0.000000000001Ki",
                2,
                Format::DecimalSI,
                "below one unit: becomes decimal SI",
            ),
            (
                "9Ei",
                MAX_BINARY_SI_NANOS,
                Format::BinarySI,
                "binary values are capped at 2^63-1",
            ),
            ("-9Ei", -MAX_BINARY_SI_NANOS, Format::BinarySI, "negative cap"),
            (
                "99999999999999999999999999999999999999Ki",
                MAX_BINARY_SI_NANOS,
                Format::BinarySI,
                "cap beyond i128",
            ),
            (
                "1e-2147483647",
                1,
                Format::DecimalExponent,
                "tiny positive rounds up",
            ),
            (
                "0e2147483647",
                0,
                Format::DecimalExponent,
                "zero with a huge exponent",
            ),
        ];
        for (input, nanos, format, msg) in cases {
            let got = q(input);
            assert_eq!(got.nanos, *nanos, "{msg}: {input}");
            assert_eq!(got.format, *format, "{msg}: {input}");
        }
    }

    #[test]
    fn rejects_invalid_quantities_naming_the_text() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            (" 1", "leading space"),
            ("1 ", "trailing space"),
            ("1 Gi", "space before suffix"),
            ("1.2.3", "two dots"),
            ("1.1.M", "two dots before suffix"),
            ("1+1.0M", "sign in the middle"),
            ("Ki", "suffix alone"),
            ("Mi", "suffix alone"),
            (".", "dot alone"),
            ("-", "sign alone"),
            ("-Ki", "sign and suffix"),
            ("aoeu", "not a number"),
            ("1K", "upper-case K is not a suffix"),
            ("200K", "upper-case K is not a suffix"),
            ("1ki", "lower-case binary suffix"),
            ("0.1mi", "unknown suffix"),
            ("0.1am", "unknown suffix"),
            ("1i", "i alone"),
            (".5i", "i alone after fraction"),
            ("10Mo", "unknown suffix"),
            ("10Mm", "two suffixes"),
            ("1Kii", "suffix with trailing garbage"),
            ("1e", "exponent without digits"),
            ("-3.01e-", "exponent sign without digits"),
            ("1e3.5", "fractional exponent"),
            ("1e2147483648", "exponent beyond int32"),
            ("1e4294967297", "exponent that would wrap in int32"),
            ("1,3G", "comma"),
            ("1e40", "too large for the representation"),
            (
                "200000000000000000000000000000",
                "too large for the representation",
            ),
        ];
        for (input, msg) in cases {
            let err = input
                .parse::<Quantity>()
                .expect_err(&format!("{msg}: {input:?} must be rejected"));
            assert_eq!(err.text, *input, "{msg}");
            assert!(err.to_string().contains(&format!("{input:?}")), "{msg}: {err}");
        }
    }

    #[test]
    fn prints_the_canonical_kubernetes_form() {
        let cases: &[(&str, &str, &str)] = &[
            ("1536Mi", "1536Mi", "already canonical"),
            ("1.5Gi", "1536Mi", "fraction moves to a smaller binary suffix"),
            ("1024Mi", "1Gi", "largest binary suffix"),
            ("1Ki", "1Ki", "Ki"),
            ("1025Ki", "1025Ki", "not a multiple of 1024"),
            ("0.5Ki", "512", "binary below 1024 prints in decimal SI"),
            ("2000", "2k", "decimal SI integer takes a suffix"),
            ("2500", "2500", "decimal SI integer without a whole suffix"),
            ("1000m", "1", "whole number drops milli"),
            ("1500m", "1500m", "milli stays"),
            ("0.5", "500m", "fraction becomes milli"),
            ("1.08", "1080m", "fraction becomes milli"),
            ("1e3", "1e3", "decimal exponent kept"),
            ("1E3", "1e3", "exponent in lower case"),
            ("12e+6", "12e6", "exponent sign dropped"),
            ("1.2e3", "1200", "exponent zero prints no suffix"),
            ("0.5e-2", "5e-3", "negative exponent"),
            ("100k", "100k", "k stays"),
            ("1000k", "1M", "largest decimal suffix"),
            ("1000M", "1G", "largest decimal suffix"),
            ("0", "0", "zero"),
            ("0Ki", "0", "binary zero prints as 0"),
            ("-0", "0", "negative zero prints as 0"),
            ("-1.5Gi", "-1536Mi", "negative binary"),
            ("-1500m", "-1500m", "negative milli"),
            (".001Ki", "1024m", "fractional binary below 1024"),
            (".000001Ki", "1024u", "micro"),
            (".000000001Ki", "1024n", "nano"),
            (".000000000001Ki", "2n", "rounded up"),
            (
                "1.0001Ki",
                "1024102400u",
                "binary with fraction prints exact decimal",
            ),
            ("1E", "1E", "exa"),
            ("1000E", "1e21", "past E falls back to exponent notation"),
            ("5000E", "5e21", "past E falls back to exponent notation"),
            ("1000000E", "1e24", "past E falls back to exponent notation"),
            (
                "9Ei",
                "9223372036854775807",
                "capped value (odd) prints in plain digits",
            ),
            ("1234567M", "1234567M", "no precision lost"),
            ("1000000000n", "1", "nano to unit"),
        ];
        for (input, want, msg) in cases {
            assert_eq!(q(input).to_string(), *want, "{msg}: {input}");
            assert_eq!(q(want), q(input), "{msg}: canonical form round-trips");
        }
        // Values reached by arithmetic rather than parsing.
        let two_pow_70 = Quantity::from_i64(1 << 60).checked_mul(1024).unwrap();
        assert_eq!(
            two_pow_70.to_string(),
            "1180591620717411303424",
            "past Ei: plain digits"
        );
        assert_eq!(
            Quantity::from_i64(-2000).to_string(),
            "-2000",
            "negative binary below a Ki multiple"
        );
        assert_eq!(
            Quantity::from_i64(3 << 20).to_string(),
            "3Mi",
            "from_i64 is binary SI"
        );
        assert_eq!(Quantity::from_milli(1500).to_string(), "1500m", "from_milli");
        assert_eq!(
            Quantity::new(3000, Format::DecimalSI).to_string(),
            "3k",
            "new decimal"
        );
    }

    #[test]
    fn compares_numerically_across_formats() {
        use std::cmp::Ordering::*;
        let cases: &[(&str, &str, std::cmp::Ordering, &str)] = &[
            ("1Gi", "1073741824", Equal, "binary vs plain"),
            ("1Gi", "1024Mi", Equal, "two binary suffixes"),
            ("200M", "0.2G", Equal, "two decimal suffixes"),
            ("1e3", "1k", Equal, "exponent vs suffix"),
            ("1500m", "1.5", Equal, "milli vs fraction"),
            ("50M", "50Mi", Less, "decimal below binary"),
            ("50Mi", "50M", Greater, "binary above decimal"),
            ("100m", "50m", Greater, "milli"),
            ("-1", "0", Less, "negative"),
            ("10000T", "100Gi", Greater, "large values"),
            ("1n", "0", Greater, "one nano"),
        ];
        for (a, b, ord, msg) in cases {
            assert_eq!(q(a).cmp(&q(b)), *ord, "{msg}: {a} vs {b}");
            assert_eq!(q(a) == q(b), *ord == Equal, "{msg}: equality");
        }
    }

    #[test]
    fn adds_and_subtracts_exactly() {
        // (a, op, b, result, canonical string, message)
        let cases: &[(&str, char, &str, &str, &str, &str)] = &[
            ("1Gi", '+', "512Mi", "1536Mi", "1536Mi", "binary sum keeps binary"),
            ("1Gi", '-', "512Mi", "512Mi", "512Mi", "binary difference"),
            ("100m", '+', "900m", "1", "1", "milli sum reaches a unit"),
            ("0.1", '+', "0.2", "0.3", "300m", "no float error"),
            ("1", '-', "1500m", "-500m", "-500m", "negative result"),
            ("1k", '+', "1Ki", "2024", "2024", "left format kept (decimal)"),
            (
                "1Ki",
                '+',
                "1k",
                "2024",
                "2024",
                "left format kept (binary, not a Ki multiple)",
            ),
            ("1Ki", '+', "1024", "2Ki", "2Ki", "left binary format kept"),
            ("0", '+', "1Gi", "1Gi", "1Gi", "zero takes the other format (Go)"),
            (
                "0",
                '-',
                "1Gi",
                "-1Gi",
                "-1Gi",
                "zero minus takes the other format (Go)",
            ),
            ("100m", '+', "0", "100m", "100m", "adding zero keeps the format"),
            ("1e3", '+', "1e3", "2e3", "2e3", "exponent format kept"),
        ];
        for (a, op, b, want, text, msg) in cases {
            let got = match op {
                '+' => q(a).checked_add(&q(b)),
                _ => q(a).checked_sub(&q(b)),
            }
            .unwrap_or_else(|| panic!("{msg}: overflow"));
            assert_eq!(got, q(want), "{msg}");
            assert_eq!(got.to_string(), *text, "{msg}");
        }
        let max = Quantity::from_nanos(i128::MAX, Format::DecimalSI);
        assert_eq!(max.checked_add(&q("1n")), None, "overflow is reported");
        assert_eq!(
            Quantity::from_nanos(i128::MIN, Format::DecimalSI).checked_sub(&q("1n")),
            None
        );
        assert_eq!(q("2Gi").checked_mul(3), Some(q("6Gi")), "multiplication");
        assert_eq!(max.checked_mul(2), None, "multiplication overflow");
    }

    #[test]
    fn value_rounds_up_away_from_zero() {
        let cases: &[(&str, i64, i64, &str)] = &[
            ("1", 1, 1000, "integer"),
            ("1500m", 2, 1500, "fraction rounds up"),
            ("1001m", 2, 1001, "any fraction rounds up"),
            ("-1500m", -2, -1500, "negative rounds away from zero"),
            ("1n", 1, 1, "one nano is one unit and one milli"),
            ("0", 0, 0, "zero"),
            ("1Gi", 1 << 30, (1 << 30) * 1000, "binary"),
            ("1e3", 1000, 1_000_000, "exponent"),
            ("12E", i64::MAX, i64::MAX, "saturates above i64"),
            ("-12E", i64::MIN, i64::MIN, "saturates below i64"),
        ];
        for (input, value, milli, msg) in cases {
            assert_eq!(q(input).value(), *value, "{msg}: value of {input}");
            assert_eq!(q(input).milli_value(), *milli, "{msg}: milli of {input}");
        }
        assert_eq!(q("50k").as_i64(), Some(50_000), "whole number");
        assert_eq!(q("1500m").as_i64(), None, "fraction is not an integer");
        assert_eq!(q("12E").as_i64(), None, "too large for i64");
        assert_eq!(q("50.703k").as_approximate_f64(), 50703.0, "float");
        assert_eq!(q("1500m").as_approximate_f64(), 1.5, "float fraction");
        assert_eq!(q("-3k").sign(), -1, "sign");
        assert!(q("0Mi").is_zero(), "zero");
    }

    #[test]
    fn serde_accepts_strings_and_numbers() {
        let cases: &[(&str, &str, &str)] = &[
            (r#""80Gi""#, "80Gi", "string"),
            (
                r#"" 1Gi ""#,
                "1Gi",
                "string with spaces is trimmed like Go's UnmarshalJSON",
            ),
            ("1024", "1024", "integer number"),
            ("-5", "-5", "negative integer"),
            ("1.5", "1500m", "fractional number"),
            ("18446744073709551615", "18446744073709551615", "u64 number"),
        ];
        for (json, canonical, msg) in cases {
            let got: Quantity = serde_json::from_str(json).unwrap_or_else(|e| panic!("{msg}: {e}"));
            assert_eq!(got.to_string(), *canonical, "{msg}");
            assert_eq!(
                serde_json::to_string(&got).unwrap(),
                format!("\"{canonical}\""),
                "{msg}: serializes canonically"
            );
        }
        for (json, msg) in [
            ("\"1Kb\"", "bad suffix"),
            ("true", "bool"),
            ("null", "null"),
            ("[]", "array"),
        ] {
            let err = serde_json::from_str::<Quantity>(json).expect_err(msg);
            assert!(!err.to_string().is_empty(), "{msg}");
        }
        let err = serde_json::from_str::<Quantity>("\"1Kb\"").unwrap_err();
        assert!(
            err.to_string().contains("\"1Kb\""),
            "the error names the text: {err}"
        );
    }
}
