//! [`NativeEngine`]: the core library called directly, with no wasm in between. It is the baseline
//! the component and core-module engines are compared against (decisions must be identical).

use sharing_affinity_core::Status;
use sharing_affinity_core::object::Object;
use sharing_affinity_core::plugin::{ClaimAllocation, Plugin};
use sharing_affinity_replay::cycle::Scheduler;
use sharing_affinity_replay::native::NativePlugin;

use crate::engine::Engine;

/// The plugin as a native Rust value ([`NativePlugin`], which the browser's explainer runs too).
pub struct NativeEngine(NativePlugin);

impl NativeEngine {
    /// A configured plugin; `config` is the plugin configuration as JSON text (empty = defaults).
    pub fn new(config: &str) -> wasmtime::Result<Self> {
        NativePlugin::new(config)
            .map(NativeEngine)
            .map_err(|e| wasmtime::format_err!("invalid plugin configuration: {e}"))
    }

    /// The plugin itself, for object events the [`Engine`] trait has no call for (deletes and
    /// updates in `simulate`).
    pub fn plugin_mut(&mut self) -> &mut Plugin {
        self.0.plugin_mut()
    }
}

impl Engine for NativeEngine {
    fn name(&self) -> &'static str {
        "native"
    }

    fn load(&mut self, objects: &[Object]) -> wasmtime::Result<Vec<String>> {
        Ok(self.0.load(objects))
    }

    fn load_refused(&mut self, objects: &[String]) -> wasmtime::Result<()> {
        self.0.load_refused(objects);
        Ok(())
    }

    fn set_clock(&mut self, unix_seconds: i64) {
        self.0.set_clock(unix_seconds);
    }

    fn prefilter(&mut self, pod: &str) -> Status {
        self.0.prefilter(pod)
    }

    fn filter(&mut self, node: &str) -> Status {
        self.0.filter(node)
    }

    fn prescore(&mut self, nodes: &[String]) -> Status {
        self.0.prescore(nodes)
    }

    fn postfilter(&mut self, nodes: &[String]) -> (Status, Option<String>) {
        self.0.postfilter(nodes)
    }

    fn score(&mut self, node: &str) -> Result<u32, Status> {
        self.0.score(node)
    }

    fn reserve(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        self.0.reserve(node)
    }

    fn unreserve(&mut self, node: &str) {
        self.0.unreserve(node);
    }

    fn bind(&mut self, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        self.0.bind(node)
    }

    fn take_logs(&mut self) -> Vec<String> {
        self.0.take_warnings()
    }
}
