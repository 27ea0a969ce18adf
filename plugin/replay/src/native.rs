//! [`NativePlugin`]: the core library driven directly, with no wasm in between. The CLI's native
//! engine and the browser's explainer both run the plugin through it.

use sharing_affinity_core::object::Object;
use sharing_affinity_core::plugin::{ClaimAllocation, EventKind, Plugin};
use sharing_affinity_core::{Error, Status};

use crate::cycle::Scheduler;

/// The plugin as a native Rust value, with the pod of the current cycle.
pub struct NativePlugin {
    plugin: Plugin,
    /// The pod of the current cycle: the replay binds (or unreserves) it before the next prefilter.
    pod: String,
}

impl NativePlugin {
    /// A configured plugin; `config` is the plugin configuration as JSON text (empty = defaults).
    pub fn new(config: &str) -> Result<Self, Error> {
        Ok(NativePlugin {
            plugin: Plugin::new(config)?,
            pod: String::new(),
        })
    }

    /// The plugin itself, for object events the cycle has no call for (deletes and updates).
    pub fn plugin_mut(&mut self) -> &mut Plugin {
        &mut self.plugin
    }

    /// Loads objects as `Add` events; returns one message per object the plugin rejected. The
    /// objects go through JSON text, exactly as they cross into the wasm engines.
    pub fn load(&mut self, objects: &[Object]) -> Vec<String> {
        let mut rejected = Vec::new();
        for object in objects {
            if let Err(e) = self.plugin.apply(EventKind::Add, &object.to_json_string()) {
                rejected.push(e.to_string());
            }
        }
        rejected
    }

    /// Hands the plugin objects (JSON text) that it rejects: it records them, and names them where
    /// a decision misses them. Their errors are those the cluster's decoding listed already.
    pub fn load_refused(&mut self, objects: &[String]) {
        for object in objects {
            let _rejected = self.plugin.apply(EventKind::Add, object);
        }
    }

    /// Sets the plugin's clock (Unix seconds).
    pub fn set_clock(&mut self, unix_seconds: i64) {
        self.plugin.set_time(unix_seconds);
    }

    /// The plugin's warnings since the last call ([`Plugin::take_warnings`]).
    pub fn take_warnings(&mut self) -> Vec<String> {
        self.plugin.take_warnings()
    }
}

impl Scheduler for NativePlugin {
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

    fn permit(&mut self, _node: &str) -> Result<(), Status> {
        Ok(())
    }

    fn binding_cycle(&mut self, _pod: &str, _node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        Err(Status::error("the native engine binds synchronously only"))
    }
}
