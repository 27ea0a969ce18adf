//! The file map of `plugin/ARCHITECTURE.md` against the files of `plugin/core/src`.
//!
//! The map is the section of `plugin/ARCHITECTURE.md` under the first heading whose text contains
//! `File map`, up to the next heading of the same or a higher level. The test fails, naming each
//! one, on:
//!
//! - every `.rs` file under `plugin/core/src` (searched recursively) that the map does not name;
//! - every path the map names in backticks that ends in `.rs` or `/` and exists neither under
//!   `plugin/core/src` nor under `plugin/core` (so `cel/mod.rs` and `tests/cycle.rs` both resolve).
//!   Spans with white space in them are not paths and are skipped.
//!
//! The rule: a file is named when its path relative to `plugin/core/src`, with `/` between
//! directories, appears as a whole backtick span of the map (`affinity.rs`,
//! `allocator/search.rs`, `cel/re2/limits.rs`); a comma-separated span (`` `a.rs, b.rs` ``) does
//! not count, each file takes its own span. A directory named in the map (`cel/`) stands for that
//! directory's `mod.rs` and for no other file in it: every other file under a directory is named
//! by its own path. `lib.rs` is named like any other file.
//!
//! Exempt, because they hold tests and no concept of the crate: files named `tests.rs` or ending
//! in `_tests.rs`, and every file under a directory named `tests`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The crate's directory, `plugin/core`.
fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The crate's `src` directory.
fn src_dir() -> PathBuf {
    crate_dir().join("src")
}

/// The text of `plugin/ARCHITECTURE.md`.
fn architecture() -> String {
    let path = crate_dir().join("../ARCHITECTURE.md");
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The map section of `doc`: from the first heading containing `File map` to the next heading of
/// the same or a higher level, or `None` when there is no such heading.
fn map_section(doc: &str) -> Option<String> {
    let mut level = None;
    let mut section = String::new();
    for line in doc.lines() {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        let is_heading = hashes > 0 && line[hashes..].starts_with(' ');
        match level {
            None => {
                if is_heading && line.contains("File map") {
                    level = Some(hashes);
                }
            }
            Some(l) => {
                if is_heading && hashes <= l {
                    break;
                }
                section.push_str(line);
                section.push('\n');
            }
        }
    }
    level.map(|_| section)
}

/// Every backtick span of `text` (inline code), in order. A run of several backticks opens a span
/// that the same run closes, as in Markdown.
fn code_spans(text: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|&&b| b == b'`').count();
        let fence = &text[i..i + run];
        let start = i + run;
        match text[start..].find(fence) {
            Some(end) => {
                spans.push(text[start..start + end].trim().to_string());
                i = start + end + run;
            }
            None => break,
        }
    }
    spans
}

/// Whether `rel` (relative to `src`, `/`-separated) is a test file, exempt from the map.
fn is_test_file(rel: &str) -> bool {
    let mut parts: Vec<&str> = rel.split('/').collect();
    let file = parts.pop().unwrap_or_default();
    file == "tests.rs" || file.ends_with("_tests.rs") || parts.contains(&"tests")
}

/// Every `.rs` file under `dir`, as paths relative to `root` with `/` between directories.
fn rust_files(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under the root");
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.insert(parts.join("/"));
        }
    }
}

#[test]
fn architecture_map_names_every_source_file_and_only_existing_paths() {
    let doc = architecture();
    let section = map_section(&doc)
        .expect("plugin/ARCHITECTURE.md has no heading containing `File map`: the map's section");
    let spans: BTreeSet<String> = code_spans(&section).into_iter().collect();

    let src = src_dir();
    let mut files = BTreeSet::new();
    rust_files(&src, &src, &mut files);

    let unnamed: Vec<&String> = files
        .iter()
        .filter(|f| !is_test_file(f))
        .filter(|f| {
            if spans.contains(*f) {
                return false;
            }
            // A directory's `mod.rs` is named by the directory (`cel/`).
            match f.strip_suffix("mod.rs") {
                Some(dir) if !dir.is_empty() => !spans.contains(dir),
                _ => true,
            }
        })
        .collect();

    let missing: Vec<&String> = spans
        .iter()
        .filter(|s| s.ends_with(".rs") || (s.ends_with('/') && s.len() > 1))
        .filter(|s| !s.contains(char::is_whitespace))
        .filter(|s| {
            let path = s.trim_end_matches('/');
            !src.join(path).exists() && !crate_dir().join(path).exists()
        })
        .collect();

    let mut report = String::new();
    if !unnamed.is_empty() {
        report.push_str("source files under plugin/core/src that the map does not name:\n");
        for f in &unnamed {
            report.push_str(&format!("  {f}\n"));
        }
    }
    if !missing.is_empty() {
        report.push_str("paths the map names that exist neither under plugin/core/src nor plugin/core:\n");
        for p in &missing {
            report.push_str(&format!("  {p}\n"));
        }
    }
    assert!(report.is_empty(), "plugin/ARCHITECTURE.md's file map:\n{report}");
}

#[test]
fn the_rules_helpers_read_as_documented() {
    assert_eq!(
        code_spans("| `cel/` | x `a.rs`, ``b`c.rs`` `unclosed"),
        vec!["cel/", "a.rs", "b`c.rs"]
    );
    assert!(is_test_file("audit/tests.rs"));
    assert!(is_test_file("cel/parse_tests.rs"));
    assert!(is_test_file("cel/tests/cases.rs"));
    assert!(!is_test_file("cel/parser_oracle.rs"));
    let doc = "# T\n## File map (`src`)\n`a.rs`\n### sub\n`b.rs`\n## Next\n`c.rs`\n";
    let section = map_section(doc).expect("a map section");
    assert!(section.contains("a.rs") && section.contains("b.rs") && !section.contains("c.rs"));
    assert_eq!(map_section("# T\n`a.rs`\n"), None);
}
