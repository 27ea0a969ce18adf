//! The `sharing-affinity` CLI: replays a recorded cluster through the plugin and prints the decisions.
//!
//! ```text
//! sharing-affinity replay CLUSTER.json|SCENARIO_DIR [--engine native|component|kswe] [--plugin FILE.wasm]
//!     [--config CONFIG.json] [--output table|json|html] [--explain] [--binding sync|async] [--now TIME]
//!     [--guest-time-limit T] [--guest-memory-limit M] [--guest-stack-limit S] [--guest-args ARG...]
//! sharing-affinity generate --nodes N --devices-per-node D [--pods P] [--running R] [--affinity-keys K]
//!     [--groups G] [--profile nic|gpu|fpga|rdma|plain] [--seed S] [--extractors-in-config] [--burst B]
//!     [--out DIR]
//! sharing-affinity simulate (the generate options) [--driver-lag N] [--output table|json]
//!     [--audit]
//! sharing-affinity audit CLUSTER.json|SCENARIO_DIR [--config CONFIG.json] [--output table|json]
//! ```
//!
//! `--engine component` (the default) and `--engine kswe` build the workspace's guest with cargo
//! when no `--plugin` is given (see [`artifact`]).
//!
//! The counts of `generate` and `simulate` have ranges: `--nodes` 1..=100000, `--devices-per-node`
//! 1..=128 (and nodes × devices per node at most 1,000,000), `--pods` 0..=1000000, `--running`
//! 0..=500000, `--groups` 1..=100000, `--burst` and `--driver-lag` 1..=1000000,
//! `--affinity-keys` 1..=8.
//!
//! Exit status: 0 when the replay ran (whatever it decided), 1 for unreadable input (also input
//! with no object of a kind the plugin reads: an empty file or List, a JSON array), a plugin that
//! fails to load, an invalid configuration or a failure while loading the objects, 2 for usage
//! errors (an unknown option, a count out of its range).
//! `audit`, and `replay --audit`, exit with 3 when the auditor finds a violation. `replay` exits
//! with 4 when it ran but objects were rejected (each is listed): its decisions are then those of
//! a cluster without them; `audit` exits with 4, naming them, when claims that may hold devices
//! could not be read (what they hold is not audited).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sharing_affinity_core::config::Config;
use sharing_affinity_host::component::ComponentPlugin;
use sharing_affinity_host::engine::PluginRuntime;
use sharing_affinity_host::generate::{self, Profile, Spec};
use sharing_affinity_host::kswe::{KsweConfig, KsweEngine, KsweModule, TrapPolicy};
use sharing_affinity_host::limits::{self, Limits};
use sharing_affinity_host::native;
use sharing_affinity_host::replay::{Binding, Cluster, Position, replay_with};
use sharing_affinity_host::{artifact, audit, html, report, simulate};
use wasmtime::error::Context;
use wasmtime::{Result, bail, format_err};

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
    /// Writes a generated cluster (deterministic for a seed) in the recorded format.
    Generate(GenerateArgs),
    /// Compares native sharing affinity with the driver workaround on one generated workload.
    Simulate(SimulateArgs),
    /// Checks the allocations recorded in a cluster's ResourceClaims against the DRA and
    /// sharing-affinity rules (capacity, dedicated devices, counters, selectors, constraints, the
    /// lock invariant, strict gating), without running the allocator. Exit status 3 on violations.
    Audit(AuditArgs),
}

/// The workload shape shared by `generate` and `simulate`. Every count has a range clap enforces
/// (an error naming the flag, exit status 2), and [`MAX_DEVICES`] bounds the devices of the
/// cluster. The generator holds the whole cluster in memory (measured: about 0.8 KB per device,
/// 5.6 KB per running pod, 2.4 KB per pending pod, 1.5 KB per group's template), so the maxima
/// keep the largest workload near 6 GB.
#[derive(Args)]
struct WorkloadArgs {
    /// Nodes, 1..=100000.
    #[arg(long, value_parser = count::<1, 100_000>)]
    nodes: usize,
    /// Devices per node, 1..=128 (nodes × devices-per-node at most 1000000).
    #[arg(long, value_parser = count::<1, 128>)]
    devices_per_node: usize,
    /// Pending pods, 0..=1000000.
    #[arg(long, default_value_t = 100, value_parser = count::<0, 1_000_000>)]
    pods: usize,
    /// Running pods with allocated claims, 0..=500000 (default: nodes × devices-per-node / 2).
    #[arg(long, value_parser = count::<0, 500_000>)]
    running: Option<usize>,
    /// Affinity keys per extractor, 1..=8 (default 1; not with --profile plain).
    #[arg(long, value_parser = count::<1, 8>)]
    affinity_keys: Option<usize>,
    /// Affinity groups, 1..=100000 (default 8; not with --profile plain).
    #[arg(long, value_parser = count::<1, 100_000>)]
    groups: Option<usize>,
    /// The device family: nic, gpu, fpga, rdma, or plain (upstream scheduler_perf's shape, no sharing).
    #[arg(long, default_value = "nic", value_parser = parse_profile)]
    profile: Profile,
    /// Random seed.
    #[arg(long, default_value_t = 5981)]
    seed: u64,
    /// Extractors in the plugin configuration instead of KEP-5981 metadata slices (needs --out).
    #[arg(long)]
    extractors_in_config: bool,
    /// Pending pods arrive in runs of this many pods of one group (a Job's replicas), 1..=1000000.
    #[arg(long, default_value_t = 1, value_parser = count::<1, 1_000_000>)]
    burst: usize,
}

/// The most devices (nodes × devices per node) `generate` and `simulate` build: about 0.8 GB
/// and 20 s for the cluster alone.
const MAX_DEVICES: usize = 1_000_000;

/// A count on the command line, in `MIN..=MAX`: clap reports an error naming the flag for text
/// that is not a whole number or is out of range, before anything is allocated for it.
fn count<const MIN: usize, const MAX: usize>(text: &str) -> std::result::Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (MIN..=MAX).contains(&n) => Ok(n),
        Ok(n) => Err(format!("must be {MIN}..={MAX}, got {n}")),
        Err(_) => Err(format!("must be a whole number in {MIN}..={MAX}")),
    }
}

#[derive(Args)]
struct GenerateArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Write a scenario directory (cluster.json, and config.json with --extractors-in-config)
    /// instead of printing the cluster.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct SimulateArgs {
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Scheduling attempts between two reconciles of the workaround driver (its reaction time,
    /// counted in scheduling cycles), 1..=1000000.
    #[arg(long, default_value_t = 8, value_parser = count::<1, 1_000_000>)]
    driver_lag: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

fn parse_profile(name: &str) -> std::result::Result<Profile, String> {
    Profile::from_name(name).ok_or_else(|| format!("unknown profile {name:?} (nic, gpu, fpga, rdma, plain)"))
}

impl WorkloadArgs {
    /// The ranges clap cannot check flag by flag: the cluster's devices.
    fn check(&self) -> std::result::Result<(), String> {
        // Both factors are range-checked, so the product cannot overflow.
        if self.nodes * self.devices_per_node > MAX_DEVICES {
            return Err(format!(
                "--nodes × --devices-per-node must be at most {MAX_DEVICES} devices, got {} × {}",
                self.nodes, self.devices_per_node
            ));
        }
        Ok(())
    }

    fn spec(&self) -> Result<Spec> {
        if self.profile == Profile::Plain && (self.affinity_keys.is_some() || self.groups.is_some()) {
            bail!("--affinity-keys and --groups do not apply to --profile plain (no sharing)");
        }
        let mut spec = Spec::new(self.nodes, self.devices_per_node);
        spec.pods = self.pods;
        spec.running = self.running.unwrap_or(spec.running);
        spec.affinity_keys = self.affinity_keys.unwrap_or(spec.affinity_keys);
        spec.groups = self.groups.unwrap_or(spec.groups);
        spec.profile = self.profile;
        spec.seed = self.seed;
        spec.extractors_in_config = self.extractors_in_config;
        spec.burst = self.burst;
        Ok(spec)
    }
}

#[derive(Args)]
struct AuditArgs {
    /// A cluster dump (as for `replay`), or a scenario directory holding `cluster.json`.
    cluster: PathBuf,
    /// The plugin configuration (for extractors configured instead of published). Default:
    /// `config.json` of a scenario directory, else none.
    #[arg(long, value_name = "CONFIG.json")]
    config: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    output: Output,
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
    #[arg(long, value_enum, default_value_t = ReplayOutput::Table)]
    output: ReplayOutput,
    /// With the table output: the code, reason and score of every node for every pod.
    #[arg(long)]
    explain: bool,
    /// Wall time for each call into a wasm guest (`500ms`, `2s`, `1m`; default 60s); a call
    /// running longer ends with an `Error` status and the instance is replaced.
    #[arg(long, value_name = "T", value_parser = limits::parse_time)]
    guest_time_limit: Option<std::time::Duration>,
    /// Largest linear memory of a wasm guest instance (`256MiB`, `1GiB`; default 1GiB); growing
    /// past it ends the call with an `Error` status and the instance is replaced.
    #[arg(long, value_name = "M", value_parser = limits::parse_bytes)]
    guest_memory_limit: Option<usize>,
    /// Largest wasm stack of a guest (`512KiB` default, `1MiB`); deeper recursion ends the call
    /// with an `Error` status and the instance is replaced.
    #[arg(long, value_name = "S", value_parser = limits::parse_bytes)]
    guest_stack_limit: Option<usize>,
    /// When binding cycles run: `sync` right after each pod's scheduling cycle; `async` as
    /// kube-scheduler does, pod N's binding cycle after pod N+1's scheduling cycle has started.
    /// Default: async with --engine kswe (the only engine that binds asynchronously), else sync.
    #[arg(long, value_enum)]
    binding: Option<BindingMode>,
    /// With --engine kswe: the guest's argv (upstream `PluginConfig.Args`, no implicit program name),
    /// for WASI guests that read it. Takes every following argument, so put it last.
    #[arg(long = "guest-args", value_name = "ARG", num_args = 1.., allow_hyphen_values = true)]
    guest_args: Vec<String>,
    /// Audit the cluster state (starting state, then after every Bind) with the independent
    /// auditor; violations are listed and the exit status is 3.
    #[arg(long)]
    audit: bool,
    /// The plugin's clock during the replay (RFC 3339), against which binding timeouts are
    /// measured. Default: the newest creation or allocation timestamp in the input.
    #[arg(long, value_name = "TIME", value_parser = parse_now)]
    now: Option<i64>,
}

/// `--now`: an RFC 3339 time as Unix seconds.
fn parse_now(text: &str) -> Result<i64, String> {
    sharing_affinity_core::time::parse_rfc3339(text).map(|(seconds, _)| seconds)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum BindingMode {
    /// Each binding cycle right after its scheduling cycle.
    Sync,
    /// Binding cycles interleaved with the next pod's scheduling cycle.
    Async,
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

/// `replay`'s output formats: [`Output`]'s and the explainer's.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ReplayOutput {
    /// One line per pod, and a latency summary.
    Table,
    /// The full report as JSON.
    Json,
    /// The explainer page's view (decisions, the scheduler's message, a node × device grid per
    /// pod, the locks of shareable devices) as one self-contained HTML file, to attach to a bug
    /// report. Computed by the native core, whatever `--engine` says.
    Html,
}
/// How a command that ran ends.
enum Verdict {
    /// Exit status 0.
    Clean,
    /// The auditor found violations: 3.
    Violations,
    /// The replay ran, but objects were rejected; or the audit could not read every claim that
    /// may hold devices: 4.
    Rejected,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Generate(GenerateArgs { workload, .. }) | Command::Simulate(SimulateArgs { workload, .. }) =
        &cli.command
        && let Err(message) = workload.check()
    {
        // A usage error like a count out of its range: clap's format and exit status.
        Cli::command().error(ErrorKind::ValueValidation, message).exit();
    }
    let result = match cli.command {
        Command::Replay(args) => run_replay(&args),
        Command::Generate(args) => run_generate(&args).map(|()| Verdict::Clean),
        Command::Simulate(args) => run_simulate(&args).map(|()| Verdict::Clean),
        Command::Audit(args) => run_audit(&args),
    };
    match result {
        Ok(Verdict::Clean) => ExitCode::SUCCESS,
        Ok(Verdict::Violations) => ExitCode::from(3),
        Ok(Verdict::Rejected) => ExitCode::from(4),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `audit`; `Ok(false)` when there are violations.
fn run_audit(args: &AuditArgs) -> Result<Verdict> {
    let (cluster_path, config_path) = resolve_inputs(&args.cluster, args.config.as_ref())?;
    let cluster = read_cluster(&cluster_path)?;
    for (invalid, at) in cluster.invalid.iter().zip(&cluster.invalid_at) {
        eprintln!(
            "warning: not audited: {invalid} (at {})",
            place(&cluster_path, *at)
        );
    }
    // Claims that did not decode may hold devices, and so may objects whose kind cannot be
    // read: what they hold is not audited.
    let identified = cluster
        .refused
        .iter()
        .map(|json| sharing_affinity_core::object::identify(json));
    let mut unread_holders: Vec<String> = identified
        .filter_map(|id| match id {
            Some((sharing_affinity_core::object::Kind::ResourceClaim, key)) => Some(key),
            _ => None,
        })
        .collect();
    let unidentified = cluster.invalid.len() - cluster.refused.len();
    if unidentified > 0 {
        unread_holders.push(format!("{unidentified} object(s) of unknown kind"));
    }
    let config = read_config(config_path.as_deref())?;
    let config = Config::from_json(&config).map_err(|e| format_err!("{e}"))?;
    let violations = sharing_affinity_core::audit::audit(&cluster.objects, &config);
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&violations)?),
        Output::Table => print!("{}", audit::table(&violations)),
    }
    if !violations.is_empty() {
        return Ok(Verdict::Violations);
    }
    if !unread_holders.is_empty() {
        eprintln!(
            "audit incomplete: what these may hold was not audited: {}",
            unread_holders.join(", ")
        );
        return Ok(Verdict::Rejected);
    }
    Ok(Verdict::Clean)
}

/// The cluster file, which must hold something to decide on: at least one object of a kind the
/// plugin reads, decoded or rejected with its kind and name. Anything else is an error naming the
/// file, not an empty result: an empty file, an empty `List` or one whose items are `null`, only
/// other kinds (a List of Namespaces), only values that are no Kubernetes object (`{"items":
/// null}`, objects nested too deep for the decoder).
fn read_cluster(path: &Path) -> Result<Cluster> {
    let cluster = Cluster::from_file(path)?;
    for duplicate in &cluster.duplicates {
        eprintln!(
            "warning: duplicate {}: the object at {} replaces the one at {} (of two objects \
             of one kind and name, the later one is read)",
            duplicate.object,
            place(path, duplicate.by),
            place(path, duplicate.replaced)
        );
    }
    // A few name the fields; a recording from a newer API server would repeat one field per
    // device thousands of times.
    const SHOWN_UNREAD: usize = 10;
    for unread in cluster.unread.iter().take(SHOWN_UNREAD) {
        eprintln!(
            "warning: {}: field {} is not read by the plugin (at {})",
            unread.object,
            unread.field,
            place(path, unread.at)
        );
    }
    if cluster.unread.len() > SHOWN_UNREAD {
        eprintln!(
            "warning: {} more fields not read by the plugin",
            cluster.unread.len() - SHOWN_UNREAD
        );
    }
    if !cluster.objects.is_empty() || !cluster.refused.is_empty() {
        return Ok(cluster);
    }
    if cluster.invalid.is_empty() && cluster.ignored.is_empty() {
        bail!(
            "{}: nothing to read: no objects (an empty file or an empty List)",
            path.display()
        );
    }
    let mut found: Vec<String> = cluster.ignored_summary().into_iter().collect();
    // A few reasons say what is wrong; all of them would repeat one mistake thousands of times.
    const SHOWN: usize = 3;
    for (invalid, at) in cluster.invalid.iter().zip(&cluster.invalid_at).take(SHOWN) {
        found.push(format!("unreadable at {}:{}: {invalid}", at.line, at.column));
    }
    if cluster.invalid.len() > SHOWN {
        found.push(format!("{} more unreadable", cluster.invalid.len() - SHOWN));
    }
    bail!(
        "{}: nothing to read: no Node, Pod, DeviceClass, ResourceSlice, ResourceClaim, \
         ResourceClaimTemplate or DeviceTaintRule ({})",
        path.display(),
        found.join("; ")
    );
}

/// A place in a file as editors and compilers write it, `FILE:LINE:COLUMN`, and its byte offset.
fn place(path: &Path, at: Position) -> String {
    format!("{}:{}:{}, byte {}", path.display(), at.line, at.column, at.byte)
}

fn read_config(path: Option<&Path>) -> Result<String> {
    match path {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading config {}", path.display()))
        }
        None => Ok(String::new()),
    }
}

/// Runs `replay`: [`Verdict::Violations`] when `--audit` finds any, else [`Verdict::Rejected`]
/// when objects were rejected.
fn run_replay(args: &ReplayArgs) -> Result<Verdict> {
    let (cluster_path, config_path) = resolve_inputs(&args.cluster, args.config.as_ref())?;
    let mut cluster = read_cluster(&cluster_path)?;
    if let Some(now) = args.now {
        cluster.now = now;
    }
    let config = read_config(config_path.as_deref())?;
    let output = match args.output {
        ReplayOutput::Table => Output::Table,
        ReplayOutput::Json => Output::Json,
        ReplayOutput::Html => return write_html(args, &cluster, &cluster_path, &config),
    };
    let mut engine = make_engine(args, &config)?;
    let mut trail = match args.audit {
        true => Some(audit::Trail::new(&cluster, &config)?),
        false => None,
    };

    let binding = match (args.binding, args.engine) {
        (Some(BindingMode::Sync), _) | (None, EngineKind::Native | EngineKind::Component) => Binding::Sync,
        (Some(BindingMode::Async), _) | (None, EngineKind::Kswe) => Binding::Async,
    };

    let bar = progress_bar(cluster.pending.len());
    let result = replay_with(
        engine.as_mut(),
        &cluster,
        binding,
        &mut || bar.inc(1),
        &mut |outcome| {
            if let Some(trail) = &mut trail {
                trail.after_bind(outcome);
            }
        },
    )?;
    bar.finish_and_clear();

    if let Some(line) = cluster.ignored_summary() {
        eprintln!("note: {line}");
    }
    for (i, rejected) in result.rejected.iter().enumerate() {
        match cluster.rejection_at(i, rejected) {
            Some(at) => eprintln!("warning: rejected {rejected} (at {})", place(&cluster_path, at)),
            None => eprintln!("warning: rejected {rejected}"),
        }
    }
    for line in engine.take_logs() {
        eprintln!("plugin log: {line}");
    }
    let Some(trail) = trail else {
        match output {
            Output::Json => println!("{}", report::to_json_text(&result, true)),
            Output::Table => print!("{}", report::table(&result, args.explain)),
        }
        return Ok(rejected_or_clean(&result));
    };
    for claim in &trail.unplaced {
        eprintln!("warning: audit: bind returned an allocation for unknown claim {claim}");
    }
    match output {
        Output::Json => {
            let mut json = report::to_json(&result);
            json["audit"] = serde_json::to_value(&trail.findings)?;
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
        Output::Table => {
            print!("{}", report::table(&result, args.explain));
            print!("{}", audit::findings_table(&trail.findings));
        }
    }
    match trail.findings.is_empty() {
        true => Ok(rejected_or_clean(&result)),
        false => Ok(Verdict::Violations),
    }
}

/// `replay --output html`: the explainer's view, computed natively ([`html`]).
fn write_html(args: &ReplayArgs, cluster: &Cluster, path: &Path, config: &str) -> Result<Verdict> {
    if args.audit || args.explain {
        bail!("--audit and --explain apply to --output table and json, not to --output html");
    }
    let explanation = sharing_affinity_replay::explain::explain_with_grids(cluster, config, html::GRID_CELLS)
        .map_err(|e| format_err!("{e}"))?;
    for rejected in &explanation.rejected {
        eprintln!("warning: rejected {rejected}");
    }
    print!("{}", html::page(&explanation, &path.display().to_string()));
    Ok(match explanation.rejected.is_empty() {
        true => Verdict::Clean,
        false => Verdict::Rejected,
    })
}

fn rejected_or_clean(result: &sharing_affinity_host::replay::Replay) -> Verdict {
    if result.rejected.is_empty() {
        Verdict::Clean
    } else {
        Verdict::Rejected
    }
}

fn run_generate(args: &GenerateArgs) -> Result<()> {
    let spec = args.workload.spec()?;
    let generated = generate::generate(&spec).map_err(|e| format_err!("{e}"))?;
    match &args.out {
        None if !generated.config.is_empty() => {
            bail!("--extractors-in-config needs --out DIR (the extractors go to DIR/config.json)")
        }
        None => println!("{}", generated.cluster),
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let cluster = dir.join("cluster.json");
            std::fs::write(&cluster, generated.cluster + "\n")
                .with_context(|| format!("writing {}", cluster.display()))?;
            if !generated.config.is_empty() {
                let config = dir.join("config.json");
                std::fs::write(&config, generated.config + "\n")
                    .with_context(|| format!("writing {}", config.display()))?;
            }
        }
    }
    let counts = generate::summary(&generated.workload);
    let line: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    eprintln!("generated: {}", line.join(", "));
    Ok(())
}

fn run_simulate(args: &SimulateArgs) -> Result<()> {
    let spec = args.workload.spec()?;
    let result = simulate::simulate(&spec, args.driver_lag)?;
    match args.output {
        Output::Json => println!("{}", simulate::to_json(&result)),
        Output::Table => print!("{}", simulate::table(&result)),
    }
    Ok(())
}

/// The cluster file and the config file: a scenario directory supplies `cluster.json` and, unless
/// `--config` is given, `config.json` when it exists.
fn resolve_inputs(path: &Path, config: Option<&PathBuf>) -> Result<(PathBuf, Option<PathBuf>)> {
    if !path.is_dir() {
        return Ok((path.to_path_buf(), config.cloned()));
    }
    let cluster = path.join("cluster.json");
    if !cluster.is_file() {
        bail!("{} is a directory without cluster.json", path.display());
    }
    let config = config
        .cloned()
        .or_else(|| Some(path.join("config.json")).filter(|p| p.is_file()));
    Ok((cluster, config))
}

fn make_engine(args: &ReplayArgs, config: &str) -> Result<Box<dyn PluginRuntime>> {
    match args.engine {
        _ if !args.guest_args.is_empty() && args.engine != EngineKind::Kswe => {
            bail!("--guest-args applies to --engine kswe only (KSWE guests read it as WASI argv)")
        }
        EngineKind::Native => {
            if args.plugin.is_some()
                || args.guest_time_limit.is_some()
                || args.guest_memory_limit.is_some()
                || args.guest_stack_limit.is_some()
            {
                bail!(
                    "--plugin and the --guest-*-limit options apply to wasm engines, not to \
                     --engine native"
                );
            }
            Ok(Box::new(native::plugin(config)?))
        }
        EngineKind::Kswe => {
            let limits = guest_limits(args);
            let path = match &args.plugin {
                Some(path) => path.clone(),
                None => artifact::default_kswe_module()?,
            };
            let wasm = artifact::read_kswe_module(&path)?;
            let config = KsweConfig {
                guest_config: config.to_string(),
                args: args.guest_args.clone(),
                trap_policy: TrapPolicy::Replace,
                limits,
                ..KsweConfig::default()
            };
            let engine = KsweModule::with_limits(&wasm, &limits)
                .and_then(|module| KsweEngine::with_config(&module, config))
                .with_context(|| plugin_label(&path))?;
            eprintln!("kswe: EventsToRegister: {}", engine.registered_events());
            Ok(Box::new(engine))
        }
        EngineKind::Component => {
            let path = match &args.plugin {
                Some(path) => path.clone(),
                None => artifact::default_component()?,
            };
            let limits = guest_limits(args);
            let plugin = ComponentPlugin::from_file_with_limits(&path, &limits)?;
            Ok(Box::new(
                plugin
                    .instantiate(config, limits)
                    .with_context(|| plugin_label(&path))?,
            ))
        }
    }
}

/// The guests' limits: the defaults, with the `--guest-*-limit` options applied.
fn guest_limits(args: &ReplayArgs) -> Limits {
    let mut limits = Limits::default();
    if let Some(time) = args.guest_time_limit {
        limits.time_per_call = time;
    }
    if let Some(memory) = args.guest_memory_limit {
        limits.memory_bytes = memory;
    }
    if let Some(stack) = args.guest_stack_limit {
        limits.max_wasm_stack = stack;
    }
    limits
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
            Ok(_) => panic!("{line:?}: not a replay"),
            Err(e) => panic!("{line:?}: {e}"),
        }
    }

    #[test]
    fn generate_refuses_options_that_do_not_apply() {
        let run = |line: &[&str]| {
            let mut full = vec![
                "sharing-affinity",
                "generate",
                "--nodes",
                "2",
                "--devices-per-node",
                "2",
            ];
            full.extend(line);
            match Cli::try_parse_from(full).map(|c| c.command) {
                Ok(Command::Generate(args)) => run_generate(&args).err().map(|e| e.to_string()),
                other => panic!("{line:?}: {:?}", other.err()),
            }
        };
        let err = run(&["--profile", "plain", "--groups", "3"]).unwrap_or_default();
        assert!(err.contains("--profile plain"), "{err}");
        let err = run(&["--extractors-in-config"]).unwrap_or_default();
        assert!(err.contains("needs --out DIR"), "{err}");
        assert!(
            Cli::try_parse_from([
                "sharing-affinity",
                "generate",
                "--nodes",
                "2",
                "--devices-per-node",
                "2",
                "--profile",
                "tpu"
            ])
            .is_err()
        );
    }

    #[test]
    fn counts_parse_within_their_range_only() {
        assert_eq!(count::<1, 8>("1"), Ok(1));
        assert_eq!(count::<1, 8>("8"), Ok(8));
        assert_eq!(count::<0, 8>("0"), Ok(0));
        assert_eq!(count::<1, 8>("0"), Err("must be 1..=8, got 0".into()));
        assert_eq!(count::<1, 8>("9"), Err("must be 1..=8, got 9".into()));
        for bad in ["", "-1", "1.5", "x", "18446744073709551616"] {
            assert_eq!(
                count::<1, 8>(bad),
                Err("must be a whole number in 1..=8".into()),
                "{bad:?}"
            );
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
    fn binding_modes_and_guest_args_parse() {
        let a = args(&[
            "c.json",
            "--engine",
            "kswe",
            "--binding",
            "sync",
            "--guest-args",
            "test",
            "-v",
        ]);
        assert_eq!(a.binding, Some(BindingMode::Sync));
        assert_eq!(a.guest_args, ["test", "-v"]);
        assert_eq!(
            args(&["c.json", "--binding", "async"]).binding,
            Some(BindingMode::Async)
        );
        assert_eq!(
            args(&["c.json"]).binding,
            None,
            "the default depends on the engine"
        );
    }

    #[test]
    fn options_that_do_not_apply_to_an_engine_are_errors() {
        // These fail before any guest is built or read.
        let cases: &[(&[&str], &str)] = &[
            (
                &["--engine", "native", "--guest-time-limit", "1s"],
                "not to --engine native",
            ),
            (
                &["--engine", "native", "--guest-memory-limit", "1GiB"],
                "not to --engine native",
            ),
            (
                &["--engine", "native", "--plugin", "p.wasm"],
                "not to --engine native",
            ),
            (
                &["--engine", "component", "--guest-args", "x"],
                "--guest-args applies to --engine kswe only",
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
    fn guest_limits_parse_and_override_the_defaults() {
        let a = args(&[
            "c.json",
            "--guest-time-limit",
            "250ms",
            "--guest-memory-limit",
            "256MiB",
            "--guest-stack-limit",
            "1MiB",
        ]);
        let limits = guest_limits(&a);
        assert_eq!(limits.time_per_call, std::time::Duration::from_millis(250));
        assert_eq!(limits.memory_bytes, 256 << 20);
        assert_eq!(limits.max_wasm_stack, 1 << 20);
        assert_eq!(guest_limits(&args(&["c.json"])), Limits::default());
        for bad in [
            &["c.json", "--guest-time-limit", "5"][..],
            &["c.json", "--guest-memory-limit", "lots"],
        ] {
            let mut full = vec!["sharing-affinity", "replay"];
            full.extend(bad);
            assert!(Cli::try_parse_from(full).is_err(), "{bad:?}");
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
