//! The adapter's decisions and Filter reasons on bundled recorded cycles match their
//! `expected.json` (the golden replay's), and its grids name the outcomes the reasons give.

use serde_json::Value;

fn scenario(name: &str) -> (String, String, Value) {
    let dir = format!("{}/../../testdata/{name}", env!("CARGO_MANIFEST_DIR"));
    let cluster = std::fs::read_to_string(format!("{dir}/cluster.json")).unwrap();
    let config = std::fs::read_to_string(format!("{dir}/config.json")).unwrap_or_default();
    let expected =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/expected.json")).unwrap()).unwrap();
    (cluster, config, expected)
}

/// A pod, its node, and `(node, code, reason)` per node.
type Decision = (String, Value, Vec<(String, String, String)>);

/// The decision of every pod.
fn decisions(v: &Value) -> Vec<Decision> {
    v["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .map(|p| {
            let nodes = p["nodes"]
                .as_array()
                .expect("nodes")
                .iter()
                .map(|n| {
                    let s = |k: &str| n[k].as_str().unwrap_or_default().to_string();
                    (s("node"), s("code"), s("reason"))
                })
                .collect();
            (p["pod"].as_str().unwrap().to_string(), p["node"].clone(), nodes)
        })
        .collect()
}

fn check(name: &str) -> Value {
    let (cluster, config, expected) = scenario(name);
    let got: Value = serde_json::from_str(&sharing_affinity_web::explain(&cluster, &config)).unwrap();
    assert!(got.get("error").is_none(), "{name}: {got}");
    assert_eq!(decisions(&got), decisions(&expected), "{name}");
    got
}

#[test]
fn nic_subnet_16_slots_17th_opens_eth2() {
    let got = check("nic-subnet-16-slots-17th-opens-eth2");
    let grid = &got["grids"]["tenant-x/web-16"];
    let outcomes: Vec<&str> = grid["rows"][0]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(grid["columns"], serde_json::json!(["eth1", "eth2", "eth3"]));
    assert_eq!(
        outcomes,
        ["capacity", "chosen", "fits"],
        "eth1 is full, eth2 opens"
    );
}

#[test]
fn pod_fits_nowhere_lock_conflict_and_full() {
    let got = check("pod-fits-nowhere-lock-conflict-and-full");
    let orphan = &got["pods"][0];
    assert_eq!(orphan["pod"], "team/orphan");
    assert_eq!(
        orphan["message"],
        "0/2 nodes are available: 1 cannot allocate all claims, 1 cannot allocate all claims: \
         eth1: locked to subnet=subnet-a, claim wants subnet=subnet-c."
    );
    let rows = got["grids"]["team/orphan"]["rows"].as_array().unwrap();
    let cell = |row: usize| rows[row]["cells"][0]["outcome"].as_str().unwrap();
    assert_eq!(
        (cell(0), cell(1)),
        ("lock", "capacity"),
        "node-a locked to subnet-a, node-b full"
    );
    let lock = got["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["device"] == "networking.example.com/node-a/eth1")
        .unwrap();
    assert_eq!(lock["recorded"]["values"], "subnet=subnet-a");
    assert_eq!(lock["recorded"]["holders"], serde_json::json!(["team/a-0-nic"]));
    assert_eq!(
        lock["replayed"]["holders"],
        serde_json::json!(["team/a-0-nic", "team/peer-nic"])
    );
}

#[test]
fn a_grid_for_a_pod_that_is_not_pending_is_an_error() {
    let (cluster, config, _) = scenario("pod-fits-nowhere-lock-conflict-and-full");
    let got: Value =
        serde_json::from_str(&sharing_affinity_web::grid(&cluster, &config, "team/nobody")).unwrap();
    assert_eq!(got["error"], "team/nobody is not a pending pod of the cluster");
    let got: Value = serde_json::from_str(&sharing_affinity_web::explain("[1]", "")).unwrap();
    assert!(got["error"].as_str().unwrap().contains("not an object"), "{got}");
}
