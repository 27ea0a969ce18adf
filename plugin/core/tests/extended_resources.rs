//! KEP-5004: extended resources backed by DRA, as the in-tree DynamicResources plugin handles them.

mod common;

use common::*;
use serde_json::{Value, json};
use sharing_affinity_core::Code;
use std::collections::HashMap;

use sharing_affinity_core::extended;
use sharing_affinity_core::model::{ContainerExtendedResourceRequest, DeviceClass, Node, Pod};

const GPU: &str = "example.com/gpu";

fn gpu_class(name: &str, extended: Option<&str>) -> Value {
    let mut c = class(name, "device.driver == \"driver-a\"");
    if let Some(r) = extended {
        c["spec"]["extendedResourceName"] = json!(r);
    }
    c
}

fn ctr(name: &str, requests: Value) -> Value {
    json!({"name": name, "image": "x", "resources": {"requests": requests, "limits": requests}})
}

fn ext_pod(name: &str, init: Vec<Value>, containers: Vec<Value>) -> Value {
    json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":NS,"uid":format!("uid-{name}"),
            "creationTimestamp":"2026-01-01T00:00:00Z"},
           "spec":{"initContainers": init, "containers": containers}})
}

fn objects(pod: Value) -> Vec<Value> {
    vec![
        node(NODE),
        gpu_class("gpu-class", Some(GPU)),
        slice1(&[device("gpu-0"), device("gpu-1"), device("gpu-2")]),
        pod,
    ]
}

fn m(container: &str, request: &str) -> ContainerExtendedResourceRequest {
    ContainerExtendedResourceRequest {
        container_name: container.into(),
        resource_name: GPU.into(),
        request_name: request.into(),
    }
}

/// The special claim's (request, count) pairs, the results, and the mappings Bind recorded.
type Special = (
    Vec<(String, i64)>,
    Vec<Vec<Got>>,
    Vec<ContainerExtendedResourceRequest>,
);

/// Schedules pod `p` on node-1 and reads back its special claim.
fn special(pod: Value) -> Special {
    let mut p = plugin("", &objects(pod));
    let got = schedule(&mut p, "p");
    let status = p
        .pod("default/p")
        .unwrap()
        .status
        .extended_resource_claim_status
        .clone()
        .expect("Bind records status.extendedResourceClaimStatus");
    let claim = p
        .claim(&format!("default/{}", status.resource_claim_name))
        .expect("the special claim is stored");
    assert_eq!(
        claim.metadata.annotations["resource.kubernetes.io/extended-resource-claim"],
        "true"
    );
    assert!(status.resource_claim_name.starts_with("p-extended-resources-"));
    assert_eq!(
        status.resource_claim_name.len(),
        "p-extended-resources-".len() + 5
    );
    assert_eq!(claim.metadata.owner_references[0].uid, "uid-p");
    assert_eq!(claim.status.reserved_for[0].name, "p");
    let reqs = claim
        .spec
        .devices
        .requests
        .iter()
        .map(|r| {
            let e = r.exactly.as_ref().unwrap();
            assert_eq!(e.device_class_name, "gpu-class");
            (r.name.clone(), e.count.unwrap())
        })
        .collect();
    (reqs, got, status.request_mappings)
}

#[test]
fn one_request_per_container_resource_with_its_count() {
    let pod = ext_pod(
        "p",
        vec![],
        vec![
            ctr("a", json!({"cpu": "1", GPU: "2"})),
            ctr("b", json!({GPU: "1"})),
        ],
    );
    let (reqs, got, mappings) = special(pod);
    // The index of the resource among the container's sorted request names: cpu < example.com/gpu.
    assert_eq!(
        reqs,
        [
            ("container-0-request-1".to_string(), 2),
            ("container-1-request-0".to_string(), 1)
        ]
    );
    assert_eq!(got[0].len(), 3, "three devices");
    assert_eq!(
        mappings,
        [m("a", "container-0-request-1"), m("b", "container-1-request-0")]
    );
}

#[test]
fn init_containers_reuse_long_lived_requests_and_keep_the_largest() {
    let sidecar = |name: &str, n: &str| {
        let mut c = ctr(name, json!({GPU: n}));
        c["restartPolicy"] = json!("Always");
        c
    };
    // A regular init container needing 2 reuses the sidecar's 1 and the container's 1: no request.
    let pod = ext_pod(
        "p",
        vec![ctr("init", json!({GPU: "2"})), sidecar("side", "1")],
        vec![ctr("main", json!({GPU: "1"}))],
    );
    let (reqs, _, mappings) = special(pod);
    assert_eq!(
        reqs,
        [
            ("container-1-request-0".to_string(), 1),
            ("container-2-request-0".to_string(), 1)
        ]
    );
    assert_eq!(
        mappings,
        [
            m("side", "container-1-request-0"),
            m("main", "container-2-request-0"),
            m("init", "container-1-request-0"),
            m("init", "container-2-request-0")
        ]
    );
    // Two regular init containers with no long-lived request: only the largest request is kept.
    let pod = ext_pod(
        "p",
        vec![ctr("i0", json!({GPU: "1"})), ctr("i1", json!({GPU: "3"}))],
        vec![ctr("main", json!({"cpu": "1"}))],
    );
    let (reqs, _, mappings) = special(pod);
    assert_eq!(reqs, [("container-1-request-0".to_string(), 3)]);
    assert_eq!(
        mappings,
        [m("i0", "container-1-request-0"), m("i1", "container-1-request-0")]
    );
}

#[test]
fn implicit_name_class_selectors_and_too_many() {
    let mut objs = objects(ext_pod(
        "p",
        vec![],
        vec![ctr("a", json!({"deviceclass.resource.kubernetes.io/other": "1"}))],
    ));
    let mut other = class(
        "other",
        "device.driver == \"driver-a\" && device.attributes[\"driver-a\"].pick == true",
    );
    other["metadata"]["name"] = json!("other");
    objs.push(other);
    objs[2] = slice1(&[
        device("gpu-0").attr("pick", "bool", json!(false)),
        device("gpu-1").attr("pick", "bool", json!(true)),
    ]);
    let mut p = plugin("", &objs);
    assert_eq!(
        schedule(&mut p, "p"),
        vec![vec![g("container-0-request-0", "gpu-1", false, None)]],
        "the implicit name deviceclass.resource.kubernetes.io/<class>, with the class's selectors"
    );
    let mut p = plugin(
        "",
        &objects(ext_pod("p", vec![], vec![ctr("a", json!({GPU: "4"}))])),
    );
    assert_eq!(
        run(&mut p, "p").expect_err("3 devices for 4").code,
        Code::Unschedulable
    );
    let mut p = plugin(
        "",
        &objects(ext_pod(
            "p",
            vec![],
            vec![ctr("a", json!({"example.com/fpga": "1"}))],
        )),
    );
    assert!(
        run(&mut p, "p").unwrap().is_empty(),
        "not backed by DRA: nothing to allocate"
    );
}

#[test]
fn what_cannot_be_decided_exactly_is_an_error() {
    let pod = ext_pod("p", vec![], vec![ctr("a", json!({GPU: "1"}))]);
    let mut objs = objects(pod.clone());
    objs.push(gpu_class("gpu-class-2", Some(GPU)));
    let mut p = plugin("", &objs);
    let st = p.prefilter("default/p");
    assert_eq!(st.code, Code::Error, "{st}");
    assert!(st.reason.contains("gpu-class and gpu-class-2"), "{st}");

    // A special claim left from an earlier cycle, with requests but no allocation.
    let mut objs = objects(pod);
    objs.push(json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
        "metadata":{"name":"p-extended-resources-abcde","namespace":NS,
                    "annotations":{"resource.kubernetes.io/extended-resource-claim":"true"},
                    "ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"uid-p","controller":true}]},
        "spec":{"devices":{"requests":[{"name":"container-0-request-0",
                 "exactly":{"deviceClassName":"gpu-class","count":1}}]}}}));
    let mut p = plugin("", &objs);
    let st = p.prefilter("default/p");
    assert_eq!(st.code, Code::Unschedulable, "{st}");
    assert!(
        st.reason.contains("cannot schedule extended resource claim"),
        "{st}"
    );
}

const FPGA: &str = "example.com/fpga";

/// Filter, Reserve and Bind of pod `p` on `node`; the allocated (claim, requests) and the status.
fn on_node(
    p: &mut sharing_affinity_core::Plugin,
    node: &str,
) -> (
    Vec<(String, Vec<String>)>,
    Option<sharing_affinity_core::model::PodExtendedResourceClaimStatus>,
) {
    let st = p.filter(node);
    assert!(st.is_success(), "{node}: {st}");
    let allocs = p.reserve(node).expect("reserve");
    p.bind("default/p", node).expect("bind");
    let got = allocs
        .iter()
        .map(|a| {
            (
                a.claim.clone(),
                a.allocation
                    .devices
                    .results
                    .iter()
                    .map(|r| r.request.to_string())
                    .collect(),
            )
        })
        .collect();
    let status = p
        .pod("default/p")
        .unwrap()
        .status
        .extended_resource_claim_status
        .clone();
    (got, status)
}

/// KEP-5004 per node (upstream's Filter): a node whose `status.allocatable` lists a resource above
/// zero serves it through its device plugin, so the special claim leaves that resource out there;
/// a zero entry or none at all leaves it to DRA. Both classes select the same four devices.
#[test]
fn device_plugin_or_dra_is_chosen_per_node() {
    let pod = ext_pod(
        "p",
        vec![],
        vec![
            ctr("a", json!({GPU: "1", FPGA: "1"})),
            ctr("b", json!({GPU: "2"})),
        ],
    );
    let mut dp_slice = slice(
        "dp-slice",
        "dp-pool",
        1,
        1,
        &[device("d0"), device("d1"), device("d2"), device("d3")],
    );
    dp_slice["spec"]["nodeName"] = json!("dp-node");
    let setup = |allocatable: Value| {
        let mut dp = node("dp-node");
        dp["status"] = json!({ "allocatable": allocatable });
        let mut fpga = class("fpga-class", "device.driver == \"driver-a\"");
        fpga["spec"]["extendedResourceName"] = json!(FPGA);
        let mut p = plugin(
            "",
            &[
                node(NODE),
                dp,
                gpu_class("gpu-class", Some(GPU)),
                fpga,
                slice1(&[device("d0"), device("d1"), device("d2"), device("d3")]),
                dp_slice.clone(),
                pod.clone(),
            ],
        );
        let st = p.prefilter("default/p");
        assert!(st.is_success(), "{st}");
        p
    };
    // A (container, resource) request: a: fpga is index 0, gpu 1 (sorted names); b: gpu is 0.
    let fpga_a = m("a", "container-0-request-0");
    let fpga_a = ContainerExtendedResourceRequest {
        resource_name: FPGA.into(),
        ..fpga_a
    };
    let (gpu_a, gpu_b) = (m("a", "container-0-request-1"), m("b", "container-1-request-0"));

    // The device plugin serves the GPUs on dp-node: only the FPGA request goes to DRA there.
    let mut p = setup(json!({GPU: "8", "cpu": "4"}));
    let (got, status) = on_node(&mut p, "dp-node");
    let status = status.expect("DRA still serves the FPGA");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, ["container-0-request-0"], "only the FPGA request");
    assert_eq!(status.request_mappings, std::slice::from_ref(&fpga_a));
    // The replay's report derives the status with `status_on_node`: the same as Bind recorded.
    let model_pod: Pod = serde_json::from_value(pod.clone()).unwrap();
    let mut dp_node: Node = serde_json::from_value(node("dp-node")).unwrap();
    std::sync::Arc::make_mut(&mut dp_node.status).allocatable =
        serde_json::from_value(json!({GPU: "8", "cpu": "4"})).unwrap();
    let mut gpu: DeviceClass = serde_json::from_value(gpu_class("gpu-class", Some(GPU))).unwrap();
    let mut fpga: DeviceClass = serde_json::from_value(gpu_class("fpga-class", Some(FPGA))).unwrap();
    gpu.metadata.name = "gpu-class".into();
    fpga.metadata.name = "fpga-class".into();
    let classes = HashMap::from([("gpu-class".to_string(), gpu), ("fpga-class".to_string(), fpga)]);
    assert_eq!(
        extended::status_on_node(&model_pod, &classes, &dp_node)
            .unwrap()
            .as_ref(),
        Some(&status)
    );
    let claim = p
        .claim(&format!("default/{}", status.resource_claim_name))
        .expect("the special claim is stored");
    let names: Vec<&str> = claim
        .spec
        .devices
        .requests
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["container-0-request-0"],
        "the node's variant of the claim"
    );

    // On a node without the entry, DRA serves both resources.
    let mut p = setup(json!({GPU: "8"}));
    let (got, status) = on_node(&mut p, NODE);
    assert_eq!(
        got[0].1,
        [
            "container-0-request-0",
            "container-0-request-1",
            "container-1-request-0",
            "container-1-request-0"
        ]
    );
    assert_eq!(
        status.unwrap().request_mappings,
        [fpga_a.clone(), gpu_a.clone(), gpu_b.clone()]
    );

    // A zero entry (a device plugin with no device) is not a device plugin serving the resource.
    let mut p = setup(json!({GPU: "0"}));
    let (got, _) = on_node(&mut p, "dp-node");
    assert_eq!(got[0].1.len(), 4, "DRA serves both resources: {got:?}");

    // The device plugin serves both: no special claim, no status, and nothing allocated.
    let mut p = setup(json!({GPU: "8", FPGA: "1"}));
    let (got, status) = on_node(&mut p, "dp-node");
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(status, None);
    let name = extended::claim_name(p.pod("default/p").unwrap());
    assert!(
        p.claim(&format!("default/{name}")).is_none(),
        "no claim was created"
    );
}
