//! A rejected object is named (kind, namespace/name, field) with the place of the error in the
//! input file, on every engine: not a column counted inside the object, not "malformed JSON"
//! for a number the decoder cannot hold.

use std::ffi::OsStr;
use std::process::{Command, Output};

/// Runs the CLI with `args`.
fn cli(args: &[&OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sharing-affinity"))
        .args(args)
        .output()
        .unwrap()
}

/// A cluster whose claim template's opaque parameters hold `1e400` (valid JSON, beyond a double),
/// written on one line or pretty-printed over many; the byte offset of `1e400`.
fn cluster(pretty: bool) -> (String, usize) {
    let items = serde_json::json!([
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nic"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == \"networking.example.com\""}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "nic-x", "namespace": "t"},
         "spec": {"spec": {"devices": {
             "requests": [{"name": "nic", "exactly": {"deviceClassName": "nic"}}],
             "config": [{"opaque": {"driver": "networking.example.com",
                                    "parameters": {"subnetID": "subnet-x", "mtu": 12345}}}]}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "t"},
         "spec": {"resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "nic-x"}]}}
    ]);
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let text = if pretty {
        serde_json::to_string_pretty(&list).unwrap()
    } else {
        serde_json::to_string(&list).unwrap()
    };
    let text = text.replace("12345", "1e400");
    let at = text.find("1e400").unwrap();
    (text, at)
}

/// 1-based line and column (in characters) of byte `at`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap().chars().count() + 1;
    (line, column)
}

#[test]
fn a_rejection_names_the_object_the_field_and_the_place_in_the_file() {
    let dir = std::env::temp_dir().join(format!("sa-input-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for pretty in [false, true] {
        let (text, at) = cluster(pretty);
        let (line, column) = line_column(&text, at);
        let file = dir.join(format!("cluster-{pretty}.json"));
        std::fs::write(&file, &text).unwrap();
        let expected = format!(
            "warning: rejected ResourceClaimTemplate t/nic-x: field \
             spec.spec.devices.config[0].opaque.parameters.mtu: number out of range \
             (at {}:{line}:{column}, byte {at})",
            file.display()
        );
        for engine in ["native", "component", "kswe"] {
            let out = cli(&[
                "replay".as_ref(),
                file.as_ref(),
                "--engine".as_ref(),
                engine.as_ref(),
            ]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(4), "{engine}: {stderr}");
            assert!(
                stderr.lines().any(|l| l == expected),
                "{engine}, pretty {pretty}: want {expected}\n{stderr}"
            );
        }
        let out = cli(&["audit".as_ref(), file.as_ref()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "warning: not audited: ResourceClaimTemplate t/nic-x: field \
                 spec.spec.devices.config[0].opaque.parameters.mtu: number out of range (at {}:{line}:{column}, byte {at})",
                file.display()
            )),
            "audit: {stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A configuration the plugin refuses: every engine prints the plugin's own reason, naming the
/// field, and the KSWE guest's (which it logs before it traps) is not lost behind the trap.
#[test]
fn a_bad_configuration_is_refused_with_the_plugin_s_reason_on_every_engine() {
    let dir = std::env::temp_dir().join(format!("sa-config-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cluster, _) = cluster(false);
    let cluster_file = dir.join("cluster.json");
    std::fs::write(&cluster_file, cluster.replace("1e400", "1500")).unwrap();
    let config_file = dir.join("config.json");
    std::fs::write(
        &config_file,
        r#"{"sharingAffinity":[{"driver":"networking.example.com","bogus":1,"cel":{"subnet":"config.subnetID"}}]}"#,
    )
    .unwrap();
    let reason = "field sharingAffinity[0].bogus: unknown field `bogus`";
    for engine in ["native", "component", "kswe"] {
        let out = cli(&[
            "replay".as_ref(),
            cluster_file.as_ref(),
            "--config".as_ref(),
            config_file.as_ref(),
            "--engine".as_ref(),
            engine.as_ref(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{engine}: {stderr}");
        let first = stderr
            .lines()
            .find(|l| l.starts_with("error: "))
            .unwrap_or_default();
        assert!(first.contains(reason), "{engine}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A cluster where two ResourceSlices share a name (the second offers one device, the first
/// two), a pod appears twice, and a third pod's `creationTimestamp` is not a time; three pods
/// each want one device.
fn duplicates_cluster() -> String {
    let slice = |devices: &[&str]| {
        serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "worker-1-nics"},
            "spec": {"driver": "networking.example.com", "nodeName": "worker-1",
                     "pool": {"name": "worker-1", "generation": 1, "resourceSliceCount": 1},
                     "devices": devices.iter().map(|d| serde_json::json!({"name": d})).collect::<Vec<_>>()}})
    };
    let pod = |name: &str, created: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "t", "creationTimestamp": created},
            "spec": {"resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "nic"}]}})
    };
    let items = serde_json::json!([
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nic"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == \"networking.example.com\""}}]}},
        slice(&["eth0", "eth1"]),
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "nic", "namespace": "t"},
         "spec": {"spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "nic"}}]}}}},
        pod("a", "2026-12-05T05:00:00Z"),
        pod("b", "2026-12-05T05:00:01Z"),
        pod("a", "2026-12-05T05:00:02Z"),
        pod("c", "garbage"),
        slice(&["eth0"]),
    ]);
    serde_json::to_string_pretty(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}))
        .unwrap()
}

/// Two objects of one kind and name: the later one is read, with a warning naming both places;
/// a timestamp that is not RFC 3339 rejects its object. Every engine prints the same.
#[test]
fn duplicates_and_bad_timestamps_read_the_same_on_every_engine() {
    let dir = std::env::temp_dir().join(format!("sa-duplicates-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = duplicates_cluster();
    let file = dir.join("cluster.json");
    std::fs::write(&file, &text).unwrap();
    let starts: Vec<usize> = text.match_indices("\n    {").map(|(at, _)| at + 5).collect();
    let place = |object: usize| {
        let (line, column) = line_column(&text, starts[object]);
        format!("{}:{line}:{column}, byte {}", file.display(), starts[object])
    };
    let warnings = [
        format!(
            "warning: duplicate ResourceSlice worker-1-nics: the object at {} replaces the one at {} \
             (of two objects of one kind and name, the later one is read)",
            place(8),
            place(2)
        ),
        format!(
            "warning: duplicate Pod t/a: the object at {} replaces the one at {} (of two objects of \
             one kind and name, the later one is read)",
            place(6),
            place(4)
        ),
    ];
    let mut outputs = Vec::new();
    for engine in ["native", "component", "kswe"] {
        let out = cli(&[
            "replay".as_ref(),
            file.as_ref(),
            "--engine".as_ref(),
            engine.as_ref(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        for warning in &warnings {
            assert!(
                stderr.lines().any(|l| l == warning),
                "{engine}: want {warning}\n{stderr}"
            );
        }
        assert!(
            stderr.contains(
                "warning: rejected Pod t/c: field metadata.creationTimestamp: \"garbage\" is not an RFC 3339 timestamp"
            ),
            "{engine}: {stderr}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        // One device (the later slice's) for two pods (`a` once): one binds.
        assert!(stdout.contains("2 pods, 1 bound"), "{engine}: {stdout}");
        // The decisions: the table and the summary (timings follow and differ).
        let decisions: Vec<&str> = stdout
            .lines()
            .take_while(|l| !l.starts_with("filter per node"))
            .collect();
        outputs.push(decisions.join("\n").replace(engine, "ENGINE"));
    }
    assert_eq!(outputs[0], outputs[1]);
    assert_eq!(outputs[0], outputs[2]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A field of a DRA object that the plugin does not read (one a newer API server added, or a
/// misspelt one) is named in a warning with where its object is; the object still loads.
#[test]
fn a_field_the_plugin_does_not_read_is_named() {
    let dir = std::env::temp_dir().join(format!("sa-unread-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (text, _) = cluster(true);
    let text = text.replace("1e400", "1500");
    let text = text.replacen(
        "\"selectors\": [",
        "\"compatibilityModeX\": \"strict\",\n      \"selectors\": [",
        1,
    );
    let class = text.find("\"kind\": \"DeviceClass\"").unwrap();
    let start = text[..class].rfind('{').unwrap();
    let (line, column) = line_column(&text, start);
    let file = dir.join("cluster.json");
    std::fs::write(&file, &text).unwrap();
    let out = cli(&[
        "replay".as_ref(),
        file.as_ref(),
        "--engine".as_ref(),
        "native".as_ref(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "warning: DeviceClass nic: field spec.compatibilityModeX is not read by the plugin (at {}:{line}:{column}, byte {start})",
        file.display()
    );
    assert!(stderr.lines().any(|l| l == expected), "want {expected}\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
