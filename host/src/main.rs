//! The `sharing-affinity` CLI: replays a recorded cluster through the plugin and prints the decisions.
//!
//! ```text
//! sharing-affinity replay CLUSTER.json|SCENARIO_DIR [--engine native|component] [--plugin FILE.wasm]
//!     [--config CONFIG.json] [--output table|json] [--explain] [--fuel N]
//! ```
//!
//! Exit status: 0 when the replay ran (whatever it decided), 1 for unreadable input, a plugin that
//! fails to load, an invalid configuration or a failure while loading the objects, 2 for usage errors.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sharing_affinity_host::component::{ComponentPlugin, Limits};
use sharing_affinity_host::engine::Engine;
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
    /// The output of `kubectl get nodes,deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates,pods -A -o json`,
    /// or a scenario directory holding `cluster.json` (and optionally `config.json`).
    cluster: PathBuf,
    /// How to run the plugin.
    #[arg(long, value_enum, default_value_t = EngineKind::Component)]
    engine: EngineKind,
    /// The plugin: a component, or a core module built with wit-bindgen. Default: build the
    /// workspace's guest with cargo and use its component.
    #[arg(long, value_name = "FILE.wasm")]
    plugin: Option<PathBuf>,
    /// The plugin configuration (JSON). Default: `config.json` of a scenario directory, else none.
    #[arg(long, value_name = "CONFIG.json")]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    output: Output,
    /// With the table output: the code, reason and score of every node for every pod.
    #[arg(long)]
    explain: bool,
    /// Fuel per call into a wasm plugin (about one unit per instruction); exhausting it is an
    /// `Error` status for that call.
    #[arg(long, value_name = "N")]
    fuel: Option<u64>,
}

/// The engines the CLI can run. New engines (e.g. the KSWE core module) add a variant here and an
/// arm in [`make_engine`].
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum EngineKind {
    /// The core library, compiled into this binary.
    Native,
    /// The WIT component in wasmtime.
    Component,
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

    for rejected in &result.rejected {
        eprintln!("warning: rejected {rejected}");
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
