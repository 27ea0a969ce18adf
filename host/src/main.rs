//! The `sharing-affinity` CLI: replays a recorded cluster through the plugin and prints the decisions.
//!
//! ```text
//! sharing-affinity replay CLUSTER.json|SCENARIO_DIR [--engine native|component|kswe] [--plugin FILE.wasm]
//!     [--config CONFIG.json] [--output table|json] [--explain] [--fuel N]
//! ```
//!
//! `--engine component` (the default) and `--engine kswe` build the workspace's guest with cargo
//! when no `--plugin` is given (see [`artifact`]).
//!
//! Exit status: 0 when the replay ran (whatever it decided), 1 for unreadable input, a plugin that
//! fails to load, an invalid configuration or a failure while loading the objects, 2 for usage errors.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sharing_affinity_host::component::{ComponentPlugin, Limits};
use sharing_affinity_host::engine::Engine;
use sharing_affinity_host::kswe::KsweEngine;
use sharing_affinity_host::native::NativeEngine;
use sharing_affinity_host::replay::{Cluster, replay};
use sharing_affinity_host::{artifact, report};
use wasmtime::error::Context;
use wasmtime::{Result, bail};

/// Replays recorded Kubernetes clusters through the sharing-affinity DRA scheduler plugin.
#[derive(Parser)]
#[command(name = "sharing-affinity", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Schedules the pending pods of a recorded cluster one by one and reports each decision.
    Replay(ReplayArgs),
}

#[derive(Args)]
struct ReplayArgs {
    /// The output of `kubectl get nodes,deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates,pods,devicetaintrules -A -o json`,
    /// or a scenario directory holding `cluster.json` (and optionally `config.json`).
    cluster: PathBuf,
    /// How to run the plugin.
    #[arg(long, value_enum, default_value_t = EngineKind::Component)]
    engine: EngineKind,
    /// The plugin. With --engine component: a component, or a core module built with wit-bindgen;
    /// with --engine kswe: any kube-scheduler-wasm-extension guest (a core module). Default: build
    /// the workspace's guest with cargo (the component, or the KSWE module in target/kswe-guest).
    #[arg(long, value_name = "FILE.wasm")]
    plugin: Option<PathBuf>,
    /// The plugin configuration (JSON; the KSWE guestConfig with --engine kswe). Default:
    /// `config.json` of a scenario directory, else none.
    #[arg(long, value_name = "CONFIG.json")]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    output: Output,
    /// With the table output: the code, reason and score of every node for every pod.
    #[arg(long)]
    explain: bool,
    /// Fuel per call into the component (about one unit per instruction); exhausting it is an
    /// `Error` status for that call. Only with --engine component.
    #[arg(long, value_name = "N")]
    fuel: Option<u64>,
}

/// The engines the CLI can run; each has an arm in [`make_engine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum EngineKind {
    /// The core library, compiled into this binary.
    Native,
    /// The WIT component in wasmtime.
    Component,
    /// A kube-scheduler-wasm-extension core module in this repository's KSWE host (with the
    /// sharing-affinity.dra/v1 extension).
    Kswe,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    /// One line per pod, and a latency summary.
    Table,
    /// The full report as JSON.
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(args) => run_replay(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_replay(args: &ReplayArgs) -> Result<()> {
    let (cluster_path, config_path) = resolve_inputs(args)?;
    let cluster = Cluster::from_file(&cluster_path)?;
    let config = match &config_path {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading config {}", path.display()))?
        }
        None => String::new(),
    };
    let mut engine = make_engine(args, &config)?;

    let bar = progress_bar(cluster.pending.len());
    let result = replay(engine.as_mut(), &cluster, &mut || bar.inc(1))?;
    bar.finish_and_clear();

    if let Some(line) = cluster.ignored_summary() {
        eprintln!("note: {line}");
    }
    for rejected in &result.rejected {
        eprintln!("warning: rejected {rejected}");
    }
    for line in engine.take_logs() {
        eprintln!("plugin log: {line}");
    }
    match args.output {
        Output::Json => println!("{}", report::to_json_text(&result, true)),
        Output::Table => print!("{}", report::table(&result, args.explain)),
    }
    Ok(())
}

/// The cluster file and the config file: a scenario directory supplies `cluster.json` and, unless
/// `--config` is given, `config.json` when it exists.
fn resolve_inputs(args: &ReplayArgs) -> Result<(PathBuf, Option<PathBuf>)> {
    if !args.cluster.is_dir() {
        return Ok((args.cluster.clone(), args.config.clone()));
    }
    let cluster = args.cluster.join("cluster.json");
    if !cluster.is_file() {
        bail!("{} is a directory without cluster.json", args.cluster.display());
    }
    let config = args
        .config
        .clone()
        .or_else(|| Some(args.cluster.join("config.json")).filter(|p| p.is_file()));
    Ok((cluster, config))
}

fn make_engine(args: &ReplayArgs, config: &str) -> Result<Box<dyn Engine>> {
    match args.engine {
        EngineKind::Native => {
            if args.plugin.is_some() || args.fuel.is_some() {
                bail!("--plugin and --fuel apply to wasm engines, not to --engine native");
            }
            Ok(Box::new(NativeEngine::new(config)?))
        }
        EngineKind::Kswe => {
            if args.fuel.is_some() {
                bail!(
                    "--fuel applies to --engine component only: the KSWE host, like upstream's, \
                     has no fuel metering"
                );
            }
            let path = match &args.plugin {
                Some(path) => path.clone(),
                None => artifact::default_kswe_module()?,
            };
            let wasm = artifact::read_kswe_module(&path)?;
            Ok(Box::new(
                KsweEngine::new(&wasm, config).with_context(|| plugin_label(&path))?,
            ))
        }
        EngineKind::Component => {
            let path = match &args.plugin {
                Some(path) => path.clone(),
                None => artifact::default_component()?,
            };
            let plugin = ComponentPlugin::from_file(&path)?;
            let mut limits = Limits::default();
            if let Some(fuel) = args.fuel {
                limits.fuel_per_call = fuel;
            }
            Ok(Box::new(
                plugin
                    .instantiate(config, limits)
                    .with_context(|| plugin_label(&path))?,
            ))
        }
    }
}

fn plugin_label(path: &Path) -> String {
    format!("starting plugin {}", path.display())
}

/// A progress bar on stderr for replays of more than 50 pods; hidden otherwise.
fn progress_bar(pods: usize) -> ProgressBar {
    if pods <= 50 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(pods as u64), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} pods {elapsed}") {
        bar.set_style(style);
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> ReplayArgs {
        let mut full = vec!["sharing-affinity", "replay"];
        full.extend(line);
        match Cli::try_parse_from(full).map(|c| c.command) {
            Ok(Command::Replay(args)) => args,
            Err(e) => panic!("{line:?}: {e}"),
        }
    }

    #[test]
    fn engine_names_parse() {
        for (name, kind) in [
            ("native", EngineKind::Native),
            ("component", EngineKind::Component),
            ("kswe", EngineKind::Kswe),
        ] {
            assert_eq!(args(&["c.json", "--engine", name]).engine, kind, "{name}");
        }
        assert_eq!(args(&["c.json"]).engine, EngineKind::Component, "default");
        assert!(Cli::try_parse_from(["sharing-affinity", "replay", "c.json", "--engine", "wazero"]).is_err());
    }

    #[test]
    fn options_that_do_not_apply_to_an_engine_are_errors() {
        // These fail before any guest is built or read.
        let cases: &[(&[&str], &str)] = &[
            (
                &["--engine", "kswe", "--fuel", "10"],
                "--fuel applies to --engine component only",
            ),
            (&["--engine", "native", "--fuel", "10"], "not to --engine native"),
            (
                &["--engine", "native", "--plugin", "p.wasm"],
                "not to --engine native",
            ),
        ];
        for (line, expected) in cases {
            let mut full = vec!["c.json"];
            full.extend(*line);
            let err = make_engine(&args(&full), "").err().map(|e| e.to_string());
            assert!(
                err.as_deref().is_some_and(|e| e.contains(expected)),
                "{line:?}: {err:?}"
            );
        }
    }

    #[test]
    fn a_kswe_plugin_that_is_a_component_is_refused_with_its_name() {
        let path = std::env::temp_dir().join(format!("sa-cli-component-{}.wasm", std::process::id()));
        std::fs::write(&path, b"\0asm\x0d\0\x01\0").unwrap();
        let result = make_engine(
            &args(&["c.json", "--engine", "kswe", "--plugin", &path.to_string_lossy()]),
            "",
        );
        std::fs::remove_file(&path).unwrap();
        let err = format!("{:#}", result.err().expect("a component is not a KSWE guest"));
        assert!(
            err.contains("a WebAssembly component") && err.contains("sa-cli-component"),
            "{err}"
        );
    }
}
