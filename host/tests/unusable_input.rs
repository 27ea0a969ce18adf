//! Input with nothing to decide on is an error naming the file, exit status 1, for `replay` and
//! `audit`: never an empty replay that exits 0 with "0 pods", nor exit 4 as if objects had been
//! read and rejected.

use std::path::Path;
use std::process::Command;

const NODE: &str = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}"#;

/// Runs `command FILE args` on a file holding `text`; the exit status and stderr.
fn run(dir: &Path, name: &str, text: &str, command: &[&str]) -> (Option<i32>, String) {
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sharing-affinity"))
        .arg(command[0])
        .arg(&file)
        .args(&command[1..])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unusable_input_is_an_error_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("sa-unusable-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let open = "[".repeat(100_000);
    let nested = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000));
    // (name, text, what stderr says besides the file name)
    let cases: Vec<(&str, String, &str)> = vec![
        ("empty", String::new(), "no objects"),
        ("blank", "\n  \n".into(), "no objects"),
        ("empty-list", r#"{"kind":"List","items":[]}"#.into(), "no objects"),
        (
            "null-list",
            r#"{"kind":"List","items":null}"#.into(),
            "no objects",
        ),
        ("items-null", r#"{"items": null}"#.into(), "field kind: missing"),
        ("array-of-numbers", "[1, 2]".into(), "is an array, not an object"),
        (
            "array-of-objects",
            format!("[{NODE}]"),
            "is an array, not an object",
        ),
        (
            "scalar-after-object",
            format!("{NODE} 7"),
            "value #1, at line 1 column",
        ),
        (
            "list-of-numbers",
            r#"{"kind":"List","items":[1,2]}"#.into(),
            "expected a JSON object",
        ),
        (
            "other-kinds",
            r#"{"kind":"List","items":[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}]}"#
                .into(),
            "Namespace 1",
        ),
        ("open-brackets", open, "EOF while parsing"),
        ("nested-arrays", nested, "is an array, not an object"),
        ("nested-objects", deep_object, "recursion limit"),
    ];
    for (name, text, says) in &cases {
        for command in [&["replay", "--engine", "native"][..], &["audit"][..]] {
            let (code, stderr) = run(&dir, name, text, command);
            assert_eq!(code, Some(1), "{} {name}: {stderr}", command[0]);
            assert!(
                stderr.contains(&format!("{name}.json")) && stderr.contains(says),
                "{} {name}: {stderr}",
                command[0]
            );
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sharing-affinity"))
        .args(["replay", "/dev/null", "--engine", "native"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("/dev/null") && stderr.contains("no objects"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One object the plugin reads is enough: the replay runs (and exits 0 with nothing to place).
#[test]
fn one_readable_object_is_something_to_decide_on() {
    let dir = std::env::temp_dir().join(format!("sa-usable-input-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (code, stderr) = run(&dir, "one-node", NODE, &["replay", "--engine", "native"]);
    assert_eq!(code, Some(0), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
