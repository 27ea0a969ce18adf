//! Times as the Kubernetes API writes them (`metav1.Time`): RFC 3339, read as Go's
//! `time.Parse(time.RFC3339, ...)` reads them, and written in UTC with second precision.

use serde::{Deserialize, Deserializer};

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Parses an RFC 3339 timestamp (`2024-01-02T03:04:05Z`, optional fraction, `Z` or `±hh:mm`)
/// into Unix seconds and nanoseconds.
pub fn parse_rfc3339(text: &str) -> Result<(i64, i32), String> {
    let bad = || format!("{text:?} is not an RFC 3339 timestamp");
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |range: std::ops::Range<usize>| -> Result<i64, String> {
        let s = text.get(range).ok_or_else(bad)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse::<i64>().map_err(|_| bad())
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return Err(bad());
    }
    let mut rest = &text[19..];
    let mut nanos = 0i32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return Err(bad());
        }
        let value: i32 = frac[..digits].parse().map_err(|_| bad())?;
        nanos = value * 10i32.pow(9 - digits as u32);
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let ob = rest.as_bytes();
            let digits = |r: std::ops::Range<usize>| ob[r].iter().all(u8::is_ascii_digit);
            if ob.len() != 6
                || !matches!(ob[0], b'+' | b'-')
                || ob[3] != b':'
                || !digits(1..3)
                || !digits(4..6)
            {
                return Err(bad());
            }
            let oh: i64 = rest[1..3].parse().map_err(|_| bad())?;
            let om: i64 = rest[4..6].parse().map_err(|_| bad())?;
            let sign = if ob[0] == b'-' { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Ok((seconds, nanos))
}

/// Formats Unix seconds as RFC 3339 in UTC with second precision, as `metav1.Time` marshals to JSON.
pub fn format_rfc3339(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Reads an optional timestamp field (`creationTimestamp`): `null` or absent is `""`; any string
/// must be an RFC 3339 time, as the API machinery's `metav1.Time` requires (an empty string
/// included).
pub(crate) fn timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(optional_timestamp(d)?.unwrap_or_default())
}

/// Reads an optional timestamp field kept as `Option` (`deletionTimestamp`): `null` is `None`;
/// a string must be an RFC 3339 time.
pub(crate) fn optional_timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let text = Option::<String>::deserialize(d)?;
    if let Some(text) = &text {
        parse_rfc3339(text).map_err(serde::de::Error::custom)?;
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_and_rejects_garbage() {
        for (text, seconds, nanos, msg) in [
            ("1970-01-01T00:00:00Z", 0, 0, "epoch"),
            ("2022-01-01T00:00:00Z", 1_640_995_200, 0, "wazero fake epoch"),
            ("2024-02-29T23:59:59Z", 1_709_251_199, 0, "leap day"),
            ("2024-02-29T23:59:59.5Z", 1_709_251_199, 500_000_000, "fraction"),
            ("2024-03-01T01:59:59+02:00", 1_709_251_199, 0, "offset"),
            ("1969-12-31T23:59:59Z", -1, 0, "before epoch"),
        ] {
            assert_eq!(parse_rfc3339(text), Ok((seconds, nanos)), "{msg}");
        }
        assert_eq!(format_rfc3339(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59Z");
        for bad in [
            "",
            "2024-02-29",
            "2024-13-01T00:00:00Z",
            "2024-02-29T23:59:59",
            "2024-02-29T23:59:59.Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad:?} must be rejected");
        }
    }
}
