//! Semantic versions as Kubernetes CEL sees them: `semver()`, DRA `version` attributes.
//!
//! Parsing follows the semver 2.0.0 grammar as `github.com/blang/semver/v4` `Parse` applies it
//! (which the Kubernetes semver library and the DRA attribute conversion use): exactly
//! `MAJOR.MINOR.PATCH`, no leading zeros in numbers, optional `-pre.release` identifiers and
//! `+build.metadata`. Ordering follows semver precedence and ignores build metadata.
//! [`Semver::parse_normalized`] is the `semver(s, true)` variant: it drops a leading `v`, fills a
//! missing minor or patch with `0` and strips leading zeros.

use std::cmp::Ordering;
use std::fmt;

/// One pre-release identifier.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PreRelease {
    Numeric(u64),
    Alpha(String),
}

impl PreRelease {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PreRelease::Numeric(a), PreRelease::Numeric(b)) => a.cmp(b),
            (PreRelease::Numeric(_), PreRelease::Alpha(_)) => Ordering::Less,
            (PreRelease::Alpha(_), PreRelease::Numeric(_)) => Ordering::Greater,
            (PreRelease::Alpha(a), PreRelease::Alpha(b)) => a.as_bytes().cmp(b.as_bytes()),
        }
    }
}

/// A parsed semantic version.
#[derive(Clone, Debug)]
pub(crate) struct Semver {
    pub(crate) major: u64,
    pub(crate) minor: u64,
    pub(crate) patch: u64,
    pre: Vec<PreRelease>,
    build: Vec<String>,
}

fn is_numeric(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit())
}

fn is_alphanumeric(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn parse_number(part: &str, what: &str) -> Result<u64, String> {
    if !is_numeric(part) {
        return Err(format!("invalid character(s) in {what} number {part:?}"));
    }
    if part.len() > 1 && part.starts_with('0') {
        return Err(format!("{what} number must not have leading zeros: {part:?}"));
    }
    part.parse()
        .map_err(|_| format!("{what} number {part:?} is not a 64-bit unsigned integer"))
}

impl Semver {
    /// Strict semver 2.0.0 parsing.
    pub(crate) fn parse(text: &str) -> Result<Semver, String> {
        if text.is_empty() {
            return Err("version string is empty".to_owned());
        }
        let mut parts = text.splitn(3, '.');
        let (Some(major), Some(minor), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!("{text:?} has no MAJOR.MINOR.PATCH elements"));
        };
        let major = parse_number(major, "major")?;
        let minor = parse_number(minor, "minor")?;
        let (rest, build) = match rest.split_once('+') {
            Some((rest, build)) => (rest, Some(build)),
            None => (rest, None),
        };
        let (patch, pre) = match rest.split_once('-') {
            Some((patch, pre)) => (patch, Some(pre)),
            None => (rest, None),
        };
        let patch = parse_number(patch, "patch")?;
        let pre = match pre {
            None => Vec::new(),
            Some(pre) => pre
                .split('.')
                .map(|id| {
                    if id.is_empty() {
                        Err(format!("empty pre-release identifier in {text:?}"))
                    } else if is_numeric(id) {
                        parse_number(id, "pre-release").map(PreRelease::Numeric)
                    } else if is_alphanumeric(id) {
                        Ok(PreRelease::Alpha(id.to_owned()))
                    } else {
                        Err(format!("invalid character(s) in pre-release identifier {id:?}"))
                    }
                })
                .collect::<Result<_, _>>()?,
        };
        let build = match build {
            None => Vec::new(),
            Some(build) => build
                .split('.')
                .map(|id| {
                    if id.is_empty() {
                        Err(format!("empty build metadata identifier in {text:?}"))
                    } else if is_alphanumeric(id) {
                        Ok(id.to_owned())
                    } else {
                        Err(format!("invalid character(s) in build metadata {id:?}"))
                    }
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Semver {
            major,
            minor,
            patch,
            pre,
            build,
        })
    }

    /// `semver(s, true)`: drop one leading `v`, strip leading zeros from each of the first three
    /// dot-separated parts, fill a missing minor/patch with `0`, then parse strictly.
    pub(crate) fn parse_normalized(text: &str) -> Result<Semver, String> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let mut parts: Vec<String> = text
            .splitn(3, '.')
            .map(|part| {
                if part.len() <= 1 {
                    return part.to_owned();
                }
                let trimmed = part.trim_start_matches('0');
                if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                    trimmed.to_owned()
                } else {
                    format!("0{trimmed}")
                }
            })
            .collect();
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err(format!(
                    "short version {text:?} cannot contain pre-release or build metadata"
                ));
            }
            parts.resize(3, "0".to_owned());
        }
        Semver::parse(&parts.join("."))
    }

    /// Semver precedence; build metadata is ignored.
    pub(crate) fn compare(&self, other: &Semver) -> Ordering {
        self.major
            .cmp(&other.major)
            .then(self.minor.cmp(&other.minor))
            .then(self.patch.cmp(&other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => self
                    .pre
                    .iter()
                    .zip(&other.pre)
                    .map(|(a, b)| a.cmp(b))
                    .find(|o| o.is_ne())
                    .unwrap_or_else(|| self.pre.len().cmp(&other.pre.len())),
            })
    }
}

impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, id) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            match id {
                PreRelease::Numeric(n) => write!(f, "{n}")?,
                PreRelease::Alpha(s) => f.write_str(s)?,
            }
        }
        for (i, id) in self.build.iter().enumerate() {
            f.write_str(if i == 0 { "+" } else { "." })?;
            f.write_str(id)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_strict_semver() {
        let valid: &[(&str, &str)] = &[
            ("1.2.3", "plain"),
            ("0.0.0", "zeros"),
            ("1.0.0-alpha", "pre-release"),
            ("1.0.0-alpha.1", "dotted pre-release"),
            ("1.0.0-0.3.7", "numeric pre-release"),
            ("1.0.0-x.7.z.92", "mixed pre-release"),
            ("1.0.0-x-y-z.--", "hyphens in pre-release"),
            ("1.0.0+20130313144700", "build metadata"),
            ("1.0.0-beta+exp.sha.5114f85", "pre-release and build"),
            ("1.0.0+21AF26D3----117B344092BD", "hyphens in build"),
            ("18446744073709551615.0.0", "u64 max"),
        ];
        for (text, msg) in valid {
            let v = Semver::parse(text).unwrap_or_else(|e| panic!("{msg}: {text}: {e}"));
            assert_eq!(v.to_string(), *text, "{msg}: round trip");
        }
        let invalid: &[(&str, &str)] = &[
            ("", "empty"),
            ("1", "major only"),
            ("1.2", "no patch"),
            ("v1.2.3", "leading v"),
            ("01.2.3", "leading zero in major"),
            ("1.02.3", "leading zero in minor"),
            ("1.2.03", "leading zero in patch"),
            ("1.2.3-01", "leading zero in numeric pre-release"),
            ("1.2.3-", "empty pre-release"),
            ("1.2.3-a..b", "empty pre-release identifier"),
            ("1.2.3+", "empty build"),
            ("1.2.3+a_b", "underscore in build"),
            ("1.2.3.4", "four parts"),
            ("1..3", "empty minor"),
            ("a.b.c", "letters"),
            (" 1.2.3", "leading space"),
            ("18446744073709551616.0.0", "beyond u64"),
            ("200K", "quantity"),
        ];
        for (text, msg) in invalid {
            assert!(Semver::parse(text).is_err(), "{msg}: {text:?} must be rejected");
        }
    }

    #[test]
    fn normalizes_on_request() {
        let cases: &[(&str, Option<&str>, &str)] = &[
            ("v1.0.0", Some("1.0.0"), "leading v"),
            ("1.0", Some("1.0.0"), "missing patch"),
            ("1", Some("1.0.0"), "missing minor and patch"),
            ("01.01.01", Some("1.1.1"), "leading zeros"),
            ("v1.00.0-alpha", Some("1.0.0-alpha"), "zeros and pre-release"),
            ("00.0.0", Some("0.0.0"), "all zeros"),
            ("1.0-alpha", None, "short version with pre-release"),
            ("1.0+build", None, "short version with build"),
            ("vv1.0.0", None, "only one v is dropped"),
        ];
        for (text, want, msg) in cases {
            match (Semver::parse_normalized(text), want) {
                (Ok(v), Some(want)) => assert_eq!(v.to_string(), *want, "{msg}"),
                (Err(_), None) => {}
                (got, _) => panic!("{msg}: {text:?} gave {got:?}"),
            }
        }
    }

    #[test]
    fn orders_by_precedence_ignoring_build() {
        // Each version is lower than the next (semver.org §11 example chain).
        let chain = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.1",
            "1.1.0",
            "2.0.0",
        ];
        for pair in chain.windows(2) {
            let (a, b) = (Semver::parse(pair[0]).unwrap(), Semver::parse(pair[1]).unwrap());
            assert_eq!(a.compare(&b), Ordering::Less, "{} < {}", pair[0], pair[1]);
            assert_eq!(b.compare(&a), Ordering::Greater, "{} > {}", pair[1], pair[0]);
        }
        let a = Semver::parse("1.2.3+build.1").unwrap();
        let b = Semver::parse("1.2.3+other").unwrap();
        assert_eq!(a.compare(&b), Ordering::Equal, "build metadata is ignored");
    }
}
