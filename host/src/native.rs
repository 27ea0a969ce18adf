//! [`NativeEngine`]: the core library called directly, with no wasm in between. It is the baseline
//! the component and core-module engines are compared against (decisions must be identical).

use sharing_affinity_core::Status;
use sharing_affinity_core::object::Object;
use sharing_affinity_core::plugin::{ClaimAllocation, EventKind, Plugin};

use crate::engine::Engine;

/// The plugin as a native Rust value.
pub struct NativeEngine {
    plugin: Plugin,
    /// The pod of the current cycle: the replay binds (or unreserves) it before the next prefilter.
    pod: String,
}

impl NativeEngine {
    /// A configured plugin; `config` is the plugin configuration as JSON text (empty = defaults).
    pub fn new(config: &str) -> wasmtime::Result<Self> {
        let plugin =
            Plugin::new(config).map_err(|e| wasmtime::format_err!("invalid plugin configuration: {e}"))?;
        Ok(NativeEngine {
            plugin,
            pod: String::new(),
        })
    }

    /// The plugin itself, for object events the [`Engine`] trait has no call for (deletes and
    /// updates in `simulate`).
    pub fn plugin_mut(&mut self) -> &mut Plugin {
        &mut self.plugin
    }
}

impl Engine for NativeEngine {
    fn name(&self) -> &'static str {
        "native"
    }

    fn load(&mut self, objects: &[Object]) -> wasmtime::Result<Vec<String>> {
        // The objects go through JSON text, exactly as they cross into the wasm engines.
        let mut rejected = Vec::new();
        for object in objects {
            if let Err(e) = self.plugin.apply(EventKind::Add, &object.to_json_string()) {
                rejected.push(e.to_string());
            }
        }
        Ok(rejected)
    }

    fn load_refused(&mut self, objects: &[String]) -> wasmtime::Result<()> {
        for object in objects {
            // The plugin rejects it (and records it): the error is the one already listed.
            let _rejected = self.plugin.apply(EventKind::Add, object);
        }
        Ok(())
    }

    fn set_clock(&mut self, unix_seconds: i64) {
        self.plugin.set_time(unix_seconds);
    }

    fn prefilter(&mut self, pod: &str) -> Status {
        self.pod = pod.to_string();
        self.plugin.prefilter(pod)
    }

    fn filter(&mut self, node: &str) -> Status {
        self.plugin.filter(node)
    }

    fn prescore(&mut self, nodes: &[String]) -> Status {
        self.plugin.prescore(nodes)
    }

    fn postfilter(&mut self, _nodes: &[String]) -> (Status, Option<String>) {
        // The plugin clears the claim in its own state: nothing else holds it.
        let answer = self.plugin.postfilter(&self.pod);
        (answer.status, answer.deallocate.map(|(claim, _)| claim))
    }

    fn score(&mut self, node: &str) -> Result<u32, Status> {
        self.plugin.score(node)
    }

    fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        self.plugin.reserve(node)
    }

    fn unreserve(&mut self, node: &str) {
        // The replay unreserves after any failed Reserve too, as kube-scheduler does; the plugin
        // then reports that the pod holds no reservation, which is nothing to act on.
        let _no_reservation = self.plugin.unreserve(&self.pod, node);
    }

    fn bind(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        self.plugin.bind(&self.pod, node)
    }

    fn take_logs(&mut self) -> Vec<String> {
        self.plugin.take_warnings()
    }
}
