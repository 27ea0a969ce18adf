//! Every count of `generate` and `simulate` is range-checked by the command line parser: a value
//! out of range, or not a whole number, is a usage error naming the flag (exit status 2), before
//! anything is allocated for it; values at the ends of each range are accepted.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sharing-affinity"))
        .args(args)
        .output()
        .unwrap()
}

/// `command --nodes 1 --devices-per-node 1` with `flag value` added (or replacing the default).
fn with(command: &str, flag: &str, value: &str) -> Output {
    let mut args = vec![command];
    for (f, v) in [("--nodes", "1"), ("--devices-per-node", "1")] {
        if f != flag {
            args.extend([f, v]);
        }
    }
    args.extend([flag, value]);
    run(&args)
}

#[test]
fn counts_out_of_range_are_usage_errors_naming_the_flag() {
    let flags: &[(&str, &[&str])] = &[
        ("--nodes", &["0", "100001"]),
        ("--devices-per-node", &["0", "129"]),
        ("--pods", &["1000001", "4294967296", "18446744073709551615", "x"]),
        ("--running", &["500001", "18446744073709551616"]),
        ("--affinity-keys", &["0", "9"]),
        ("--groups", &["0", "100001"]),
        ("--burst", &["0", "18446744073709551615"]),
    ];
    for command in ["generate", "simulate"] {
        for (flag, values) in flags {
            for value in *values {
                let out = with(command, flag, value);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(2), "{command} {flag} {value}: {stderr}");
                assert!(
                    stderr.contains(flag) && stderr.contains("must be"),
                    "{command} {flag} {value}: {stderr}"
                );
            }
        }
    }
    for value in ["0", "1000001", "x"] {
        let out = with("simulate", "--driver-lag", value);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--driver-lag {value}: {stderr}");
        assert!(
            stderr.contains("--driver-lag") && stderr.contains("must be"),
            "{stderr}"
        );
    }
}

/// The cluster's devices are bounded as a whole: 100,000 nodes of 128 devices each (each factor
/// in range) would take about 10 GB and minutes to generate.
#[test]
fn too_many_devices_in_all_is_a_usage_error() {
    for command in ["generate", "simulate"] {
        let out = run(&[command, "--nodes", "100000", "--devices-per-node", "128"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("--nodes × --devices-per-node must be at most 1000000"),
            "{command}: {stderr}"
        );
    }
}

#[test]
fn counts_at_the_ends_of_their_ranges_are_accepted() {
    let out = run(&[
        "generate",
        "--nodes",
        "1",
        "--devices-per-node",
        "128",
        "--pods",
        "0",
        "--running",
        "0",
        "--affinity-keys",
        "8",
        "--groups",
        "100000",
        "--burst",
        "1000000",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
