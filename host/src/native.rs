//! The native engine: the core's [`Plugin`] called directly, with no wasm in between. It is the
//! baseline the component and core-module engines are compared against (decisions must be
//! identical). The plugin implements the scheduling-cycle calls itself
//! ([`Scheduler`](sharing_affinity_core::contract::Scheduler)); this adds what the host needs
//! around them.

use sharing_affinity_core::Plugin;
use sharing_affinity_core::object::Object;
use sharing_affinity_replay::cluster::{add_objects, add_refused};

use crate::engine::PluginRuntime;

/// A configured plugin; `config` is the plugin configuration as JSON text (empty = defaults).
pub fn plugin(config: &str) -> wasmtime::Result<Plugin> {
    Plugin::new(config).map_err(|e| wasmtime::format_err!("invalid plugin configuration: {e}"))
}

impl PluginRuntime for Plugin {
    fn name(&self) -> &'static str {
        "native"
    }

    fn load(&mut self, objects: &[Object]) -> wasmtime::Result<Vec<String>> {
        Ok(add_objects(self, objects))
    }

    fn load_refused(&mut self, objects: &[String]) -> wasmtime::Result<()> {
        add_refused(self, objects);
        Ok(())
    }

    fn take_logs(&mut self) -> Vec<String> {
        self.take_warnings()
    }
}
