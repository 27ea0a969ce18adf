//! The adapter's decisions on bundled recorded cycles match their `expected.json` (pod → node).

use serde_json::Value;

fn check(scenario: &str) {
    let dir = format!("{}/../../testdata/{scenario}", env!("CARGO_MANIFEST_DIR"));
    let cluster = std::fs::read_to_string(format!("{dir}/cluster.json")).unwrap();
    let config = std::fs::read_to_string(format!("{dir}/config.json")).unwrap_or_default();
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/expected.json")).unwrap()).unwrap();
    let got: Value = serde_json::from_str(&sharing_affinity_web::explain(&cluster, &config)).unwrap();
    let decisions = |v: &Value| -> Vec<(String, Value)> {
        v["pods"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["pod"].as_str().unwrap().to_string(), p["node"].clone()))
            .collect()
    };
    assert_eq!(decisions(&got), decisions(&expected), "{scenario}");
}

#[test]
fn nic_subnet_16_slots_17th_opens_eth2() {
    check("nic-subnet-16-slots-17th-opens-eth2");
}

#[test]
fn pod_fits_nowhere_lock_conflict_and_full() {
    check("pod-fits-nowhere-lock-conflict-and-full");
}
