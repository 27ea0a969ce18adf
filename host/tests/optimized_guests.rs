//! The guests the host runs are binaryen's `wasm-opt` output (`artifact::optimize`), and they decide
//! as the modules rustc built: for both guests, the optimized module is what the host prepares, it
//! is smaller, it imports and exports the same names with the same types, and every recorded
//! scenario replays to the same decisions (per pod: node, every node's filter status and reason,
//! scores, allocations) through the optimized and the unoptimized module.
//!
//! Needs `wasm-opt` (`$SA_WASM_OPT` or on the `PATH`; CI installs binaryen); without it the host
//! runs the unoptimized modules, which the other tests check, and this test prints `SKIPPED` and
//! passes.

use std::io::Write as _;
use std::path::Path;

use serde_json::Value;
use sharing_affinity_host::artifact::{self, Guest, Optimizer};
use sharing_affinity_host::component::{ComponentPlugin, Limits};
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::kswe::{KsweEngine, KsweModule};
use sharing_affinity_host::replay::{Cluster, replay, scenario_dirs};
use sharing_affinity_host::report;

/// Each import and export of a core module, with its type, in order.
fn interface(wasm: &[u8]) -> Vec<String> {
    let engine = wasmtime::Engine::default();
    let module = wasmtime::Module::new(&engine, wasm).expect("the module compiles");
    let imports = module
        .imports()
        .map(|i| format!("import {}.{}: {}", i.module(), i.name(), describe(&i.ty())));
    let exports = module
        .exports()
        .map(|e| format!("export {}: {}", e.name(), describe(&e.ty())));
    imports.chain(exports).collect()
}

/// A type as text, without the engine's internal type indexes.
fn describe(ty: &wasmtime::ExternType) -> String {
    use wasmtime::ExternType;
    match ty {
        ExternType::Func(f) => format!(
            "func {:?} -> {:?}",
            f.params().map(|t| t.to_string()).collect::<Vec<_>>(),
            f.results().map(|t| t.to_string()).collect::<Vec<_>>()
        ),
        ExternType::Memory(m) => format!("memory {}..{:?}", m.minimum(), m.maximum()),
        ExternType::Global(g) => format!("global {} {:?}", g.content(), g.mutability()),
        ExternType::Table(t) => format!("table {} {}..{:?}", t.element(), t.minimum(), t.maximum()),
        ExternType::Tag(_) => "tag".to_string(),
    }
}

fn config(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("config.json")).unwrap_or_default()
}

fn decisions(engine: &mut dyn PluginRuntime, dir: &Path) -> Value {
    let cluster = Cluster::from_file(&dir.join("cluster.json")).unwrap();
    report::decisions(&replay(engine, &cluster, &mut || {}).unwrap())
}

#[test]
fn the_optimized_guests_are_smaller_and_decide_as_the_built_ones() {
    if let other @ (Optimizer::Off | Optimizer::NotFound) = Optimizer::from_env() {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: no wasm-opt to optimize the guests with ({other:?}; install binaryen)"
        );
        return;
    }
    let component = artifact::default_component().unwrap();
    let kswe = artifact::default_kswe_module().unwrap();
    assert_eq!(
        component,
        Guest::Component.target_dir().join(artifact::OPTIMIZED_COMPONENT)
    );
    assert_eq!(kswe, Guest::Kswe.optimized_module());

    for guest in [Guest::Component, Guest::Kswe] {
        let built = std::fs::read(guest.core_module()).unwrap();
        let optimized = std::fs::read(guest.optimized_module()).unwrap();
        assert!(
            optimized.len() * 100 < built.len() * 95,
            "{guest:?}: {} bytes after wasm-opt, {} before",
            optimized.len(),
            built.len()
        );
        assert_eq!(interface(&optimized), interface(&built), "{guest:?}");
    }

    let optimized = ComponentPlugin::from_file(&component).unwrap();
    let built = ComponentPlugin::from_file(&Guest::Component.core_module()).unwrap();
    let optimized_kswe = KsweModule::new(&std::fs::read(&kswe).unwrap()).unwrap();
    let built_kswe = KsweModule::new(&std::fs::read(Guest::Kswe.core_module()).unwrap()).unwrap();
    let dirs = scenario_dirs();
    assert!(dirs.len() >= 20, "only {} scenarios", dirs.len());
    for dir in dirs {
        let config = config(&dir);
        let run = |plugin: &ComponentPlugin| {
            let mut engine = plugin.instantiate(&config, Limits::default()).unwrap();
            decisions(&mut engine, &dir)
        };
        assert_eq!(run(&optimized), run(&built), "component: {}", dir.display());
        let run = |module: &KsweModule| {
            let mut engine = KsweEngine::from_module(module, &config).unwrap();
            decisions(&mut engine, &dir)
        };
        assert_eq!(run(&optimized_kswe), run(&built_kswe), "kswe: {}", dir.display());
    }
}
