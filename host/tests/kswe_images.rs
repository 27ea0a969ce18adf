//! Faithful Pod, Node and NodeInfo for KSWE guests: a recorded cycle with container images on the
//! nodes (`tests/wat/image_locality.cluster.json`), replayed through our own image-locality guest
//! (`tests/wat/image_locality.wat`, the rule of kube-scheduler's ImageLocality plugin), scores the
//! nodes as the real plugin would. The expected scores are worked out by hand below.

use std::path::Path;

use sharing_affinity_host::kswe::imports::image_states_json;
use sharing_affinity_host::kswe::{KsweEngine, KsweModule};
use sharing_affinity_host::replay::{Binding, Cluster, replay_with};

fn wat(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wat").join(name);
    wat::parse_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn cluster() -> Cluster {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wat/image_locality.cluster.json");
    Cluster::from_file(&path).unwrap()
}

#[test]
fn image_states_are_filled_as_the_scheduler_snapshot_does() {
    let cluster = cluster();
    let module = KsweModule::new(&wat("image_locality.wat")).unwrap();
    let mut engine = KsweEngine::from_module(&module, "").unwrap();
    sharing_affinity_host::engine::PluginRuntime::load(&mut engine, &cluster.objects).unwrap();
    let guard = engine.host().cluster();
    let store = &guard.store;
    let app = "registry.example.com/shop/app";
    assert_eq!(
        image_states_json(store, "node-b"),
        format!(
            r#"{{"docker.io/library/nginx:latest":{{"Size":209715200,"NumNodes":1,"Nodes":null}},"nginx:latest":{{"Size":209715200,"NumNodes":1,"Nodes":null}},"{app}:1.0":{{"Size":629145600,"NumNodes":2,"Nodes":null}}}}"#
        ),
        "every name of every image; NumNodes counts the nodes listing the name"
    );
    assert_eq!(image_states_json(store, "node-c"), "{}", "a node without images");
    assert_eq!(image_states_json(store, "node-x"), "null", "an unknown node");
}

/// MiB = 1048576; min = 23 MiB; max = 1000 MiB per container; 3 nodes.
/// * app-0 (one container, app:1.0 of 600 MiB on 2 nodes): node-a and node-b
///   sum = 600 MiB * 2 / 3 = 419430400; 100 * (419430400 - 24117248) / (1048576000 - 24117248)
///   = 38.58 → 38; node-c: 0.
/// * web-0 (init container app:1.0, container "nginx" → nginx:latest of 200 MiB on 1 node; max =
///   2000 MiB): node-a 419430400 → 19.07 → 19; node-b 419430400 + 209715200 / 3 = 489335466 →
///   22.44 → 22; node-c: 0.
#[test]
fn an_image_locality_guest_scores_as_kube_schedulers_plugin() {
    let cluster = cluster();
    let module = KsweModule::new(&wat("image_locality.wat")).unwrap();
    let mut engine = KsweEngine::from_module(&module, "").unwrap();
    let replay = replay_with(&mut engine, &cluster, Binding::Async, &mut || {}, &mut |_| {}).unwrap();
    let scores: Vec<(String, Vec<Option<u32>>, Option<String>)> = replay
        .pods
        .iter()
        .map(|p| {
            (
                p.pod.clone(),
                p.nodes.iter().map(|n| n.score).collect(),
                p.node.clone(),
            )
        })
        .collect();
    assert_eq!(
        scores,
        [
            (
                "shop/app-0".to_string(),
                vec![Some(38), Some(38), Some(0)],
                Some("node-a".to_string())
            ),
            (
                "shop/web-0".to_string(),
                vec![Some(19), Some(22), Some(0)],
                Some("node-b".to_string())
            ),
        ]
    );
    assert_eq!(engine.traps(), 0);
}
