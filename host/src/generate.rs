//! A deterministic workload generator: a recorded scheduling cycle of any size, in the same
//! `kind: List` format as `testdata/*/cluster.json` (what `kubectl get ... -o json` prints).
//!
//! [`generate`] builds, for a [`Spec`] and a seed:
//! - `nodes` nodes, each with its own pool: a slice of `devices_per_node` shareable devices
//!   (`allowMultipleAllocations`, a consumable capacity with a request policy), for the `gpu`
//!   profile a second slice of partitionable shared counters, and a KEP-5981 metadata slice with
//!   the sharing-affinity extractors (or, with `extractors_in_config`, a plugin configuration);
//! - a DeviceClass with a CEL selector;
//! - one ResourceClaimTemplate per affinity group, and direct ResourceClaims for every fourth
//!   pending pod, whose opaque configs carry the group's values (one per affinity key);
//! - `running` running pods whose claims are allocated (each on a device locked to its group, or
//!   dedicated for the `plain` profile), and `pods` pending pods.
//!
//! [`Profile::Plain`] is the shape of upstream's scheduler_perf DRA workloads: plain devices, one
//! claim per pod from one template, no sharing.
//!
//! [`Workload`] keeps the generated model (who runs where) so that the `simulate` command can
//! render the same workload for the driver workaround ([`Variant::Workaround`]) and republish a
//! node's slices as a driver would.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};

/// The device families the generator can produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// NICs with 16 slots each; affinity keys from a `NICConfig` (`subnet`, `vlan`, ...).
    Nic,
    /// GPUs with 80Gi of memory shared in 8Gi requests (10 shares), drawing on a per-node power
    /// counter set that lets only three quarters of a node's GPUs be in use at once.
    Gpu,
    /// FPGAs with 32Gi of HBM shared in 4Gi requests (8 shares); affinity keys from an
    /// `FPGAConfig` (`bitstream`, ...).
    Fpga,
    /// RDMA HCAs with 512 queue pairs shared in blocks of 32 (16 shares); keys from an
    /// `RDMAConfig` (`pkey`, ...).
    Rdma,
    /// upstream scheduler_perf's DRA shape: plain devices, one claim per pod, no sharing.
    Plain,
}

impl Profile {
    /// Parses `nic|gpu|fpga|rdma|plain`.
    pub fn from_name(name: &str) -> Option<Profile> {
        Some(match name {
            "nic" => Profile::Nic,
            "gpu" => Profile::Gpu,
            "fpga" => Profile::Fpga,
            "rdma" => Profile::Rdma,
            "plain" => Profile::Plain,
            _ => return None,
        })
    }

    fn shape(self) -> &'static Shape {
        match self {
            Profile::Nic => &NIC,
            Profile::Gpu => &GPU,
            Profile::Fpga => &FPGA,
            Profile::Rdma => &RDMA,
            Profile::Plain => &PLAIN,
        }
    }
}

/// The static description of a profile.
struct Shape {
    driver: &'static str,
    class: &'static str,
    /// Extra CEL in the class selector (after the driver test).
    class_selector: &'static str,
    device_prefix: &'static str,
    /// The consumable capacity: name (without the driver prefix), total, request policy, request.
    capacity: Option<Capacity>,
    /// Opaque config `kind`; affinity keys (extractor key, config field).
    config_kind: &'static str,
    keys: [&'static str; 8],
    request: &'static str,
    template_prefix: &'static str,
}

struct Capacity {
    name: &'static str,
    total: &'static str,
    /// The request policy as JSON text.
    policy: &'static str,
    request: &'static str,
    shares: usize,
}

const KEYS_NET: [&str; 8] = ["subnet", "vlan", "vrf", "tenant", "qos", "pkey", "zone", "mtu"];

static NIC: Shape = Shape {
    driver: "networking.example.com",
    class: "nic.networking.example.com",
    class_selector: "device.allowMultipleAllocations == true && \
                     device.attributes[\"networking.example.com\"].linkSpeedGbps >= 100",
    device_prefix: "eth",
    capacity: Some(Capacity {
        name: "slots",
        total: "16",
        policy: r#"{"default":"1","validValues":["1"]}"#,
        request: "1",
        shares: 16,
    }),
    config_kind: "NICConfig",
    keys: KEYS_NET,
    request: "nic",
    template_prefix: "net",
};

static GPU: Shape = Shape {
    driver: "gpu.example.com",
    class: "gpu.example.com",
    class_selector: "device.allowMultipleAllocations == true && \
                     device.attributes[\"gpu.example.com\"].driverVersion.isGreaterThan(semver(\"550.0.0\"))",
    device_prefix: "gpu-",
    capacity: Some(Capacity {
        name: "memory",
        total: "80Gi",
        policy: r#"{"default":"8Gi","validRange":{"min":"4Gi","step":"4Gi"}}"#,
        request: "8Gi",
        shares: 10,
    }),
    config_kind: "GPUConfig",
    keys: [
        "tenant", "mode", "mps", "priority", "zone", "model", "image", "team",
    ],
    request: "gpu",
    template_prefix: "gpu",
};

static FPGA: Shape = Shape {
    driver: "fpga.example.com",
    class: "fpga.example.com",
    class_selector: "device.allowMultipleAllocations == true && \
                     device.attributes[\"fpga.example.com\"].family == \"agilex\"",
    device_prefix: "fpga-",
    capacity: Some(Capacity {
        name: "hbm",
        total: "32Gi",
        policy: r#"{"default":"4Gi","validRange":{"min":"1Gi","step":"1Gi"}}"#,
        request: "4Gi",
        shares: 8,
    }),
    config_kind: "FPGAConfig",
    keys: [
        "bitstream",
        "shell",
        "clock",
        "tenant",
        "region",
        "zone",
        "team",
        "mode",
    ],
    request: "fpga",
    template_prefix: "fpga",
};

static RDMA: Shape = Shape {
    driver: "rdma.example.com",
    class: "hca.rdma.example.com",
    class_selector: "device.allowMultipleAllocations == true && \
                     device.attributes[\"rdma.example.com\"].linkLayer == \"InfiniBand\"",
    device_prefix: "mlx5_",
    capacity: Some(Capacity {
        name: "qp",
        total: "512",
        policy: r#"{"default":"32","validRange":{"min":"32","step":"32"}}"#,
        request: "32",
        shares: 16,
    }),
    config_kind: "RDMAConfig",
    keys: ["pkey", "subnet", "vlan", "tenant", "qos", "zone", "vrf", "mtu"],
    request: "hca",
    template_prefix: "rdma",
};

static PLAIN: Shape = Shape {
    driver: "test-driver.cdi.k8s.io",
    class: "test-class",
    class_selector: "",
    device_prefix: "device-",
    capacity: None,
    config_kind: "",
    keys: KEYS_NET,
    request: "req-0",
    template_prefix: "test-claim-template",
};

/// Power a GPU draws from its node's counter set (`gpu` profile).
const GPU_WATTS: i64 = 350;

/// What to generate. [`Spec::new`] gives the defaults the CLI uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Number of nodes (`node-00000`, ...).
    pub nodes: usize,
    /// Devices per node.
    pub devices_per_node: usize,
    /// Pending pods.
    pub pods: usize,
    /// Running pods, each holding one share (or one device for `plain`).
    pub running: usize,
    /// Affinity keys per extractor (1..=8). Ignored by `plain`.
    pub affinity_keys: usize,
    /// Affinity groups (distinct value tuples). Ignored by `plain`.
    pub groups: usize,
    /// The device family.
    pub profile: Profile,
    /// The random seed: the same spec gives the same bytes.
    pub seed: u64,
    /// Extractors in the plugin configuration instead of metadata slices.
    pub extractors_in_config: bool,
    /// Pending pods arrive in runs of this many pods of one group (a Job's replicas); 1 = each
    /// pod draws its group.
    pub burst: usize,
    /// Further pool and claim shapes (all off by default; see [`Shapes`]).
    pub shapes: Shapes,
}

/// Pool and claim shapes beyond the profile's one request per claim, for randomized tests. All off
/// by default, and a spec with all off generates exactly what it did before they existed. With any
/// on, devices carry two more attributes (`tier`: `fast` or `slow`, `numa`: 0 or 1, drawn per
/// device), and each pending pod draws one shape among those enabled (or the profile's basic
/// claim) from a random stream of its own, so the running pods and groups stay those of the same
/// spec without shapes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shapes {
    /// Each node's pool draws its extractors: all devices (as without shapes), none (its devices
    /// are shared without locks), or only the `tier == "fast"` devices (an extractor selector).
    pub pool_extractors: bool,
    /// Requests with a CEL selector on `tier`.
    pub selectors: bool,
    /// `firstAvailable` requests: two `fast` devices, else one device of any tier.
    pub first_available: bool,
    /// `allocationMode: All` requests, over the `fast` devices or over every device.
    pub all: bool,
    /// Claims of two devices: one request with `count: 2`, or two requests under a
    /// `matchAttribute` or `distinctAttribute` constraint on `numa`.
    pub constraints: bool,
    /// Claims without the opaque configuration the extractors read (strict gating keeps them off
    /// locked pools' devices).
    pub unconfigured: bool,
}

impl Shapes {
    /// Every shape on.
    pub fn all() -> Shapes {
        Shapes {
            pool_extractors: true,
            selectors: true,
            first_available: true,
            all: true,
            constraints: true,
            unconfigured: true,
        }
    }

    /// Whether any shape is on.
    pub fn any(&self) -> bool {
        *self != Shapes::default()
    }

    /// The claim shapes enabled, after the basic claim.
    fn claims(&self) -> Vec<ClaimShape> {
        let mut out = vec![ClaimShape::Basic];
        if self.selectors {
            out.extend([ClaimShape::Selector("fast"), ClaimShape::Selector("slow")]);
        }
        if self.first_available {
            out.push(ClaimShape::FirstAvailable);
        }
        if self.all {
            out.extend([
                ClaimShape::All { fast_only: true },
                ClaimShape::All { fast_only: false },
            ]);
        }
        if self.constraints {
            out.extend([ClaimShape::Count2, ClaimShape::Match, ClaimShape::Distinct]);
        }
        if self.unconfigured {
            out.push(ClaimShape::Unconfigured);
        }
        out
    }
}

/// The shape of a pending pod's claim (see [`Shapes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimShape {
    /// The profile's claim: one request for one device (a share of it).
    Basic,
    /// One device whose `tier` is the given one.
    Selector(&'static str),
    /// `firstAvailable`: two `fast` devices, else one device.
    FirstAvailable,
    /// `allocationMode: All` over the `fast` devices, or over every device of the class.
    All {
        /// Only the `fast` devices.
        fast_only: bool,
    },
    /// One request with `count: 2`.
    Count2,
    /// Two requests whose devices have the same `numa`.
    Match,
    /// Two requests whose devices have distinct `numa`.
    Distinct,
    /// The basic claim without its opaque configuration.
    Unconfigured,
}

/// Where a node's pool applies sharing-affinity extractors (with [`Shapes::pool_extractors`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolExtractors {
    /// To every device (the only mode without shapes).
    Every,
    /// To no device: the pool publishes no extractors.
    None,
    /// To the `tier == "fast"` devices only.
    Fast,
}

/// What [`Shapes`] drew for a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drawn {
    /// Per node: where its pool applies extractors.
    pub pools: Vec<PoolExtractors>,
    /// Per device (node × devices per node): `tier == "fast"`.
    pub fast: Vec<bool>,
    /// Per device: its `numa` (0 or 1).
    pub numa: Vec<u8>,
    /// Per pending pod: its claim's shape.
    pub claims: Vec<ClaimShape>,
}

impl Spec {
    /// Defaults: 100 pending pods, `nodes × devices_per_node / 2` running pods (each on a random
    /// device, sharing it when the device's group matches), 1 key, 8 groups, `nic`, seed 5981,
    /// extractors in metadata slices.
    pub fn new(nodes: usize, devices_per_node: usize) -> Spec {
        Spec {
            nodes,
            devices_per_node,
            pods: 100,
            running: nodes * devices_per_node / 2,
            affinity_keys: 1,
            groups: 8,
            profile: Profile::Nic,
            seed: 5981,
            extractors_in_config: false,
            burst: 1,
            shapes: Shapes::default(),
        }
    }

    fn check(&self) -> Result<(), String> {
        if self.nodes == 0 || self.nodes > 100_000 {
            return Err(format!("--nodes must be 1..=100000, got {}", self.nodes));
        }
        // Every pending pod is a few objects in memory and in the JSON: a count past this would
        // only exhaust memory (2^32 pods asked for 32 GiB before this check).
        if self.pods > 1_000_000 {
            return Err(format!("--pods must be 0..=1000000, got {}", self.pods));
        }
        if self.devices_per_node == 0 || self.devices_per_node > 128 {
            return Err(format!(
                "--devices-per-node must be 1..=128, got {}",
                self.devices_per_node
            ));
        }
        if self.profile == Profile::Plain {
            if self.extractors_in_config {
                return Err("--extractors-in-config does not apply to --profile plain (no sharing)".into());
            }
            return Ok(());
        }
        if self.burst == 0 || self.burst > 1_000_000 {
            return Err(format!("--burst must be 1..=1000000, got {}", self.burst));
        }
        if !(1..=8).contains(&self.affinity_keys) {
            return Err(format!(
                "--affinity-keys must be 1..=8, got {}",
                self.affinity_keys
            ));
        }
        if self.groups == 0 || self.groups > 1_000_000 {
            return Err(format!("--groups must be 1..=1000000, got {}", self.groups));
        }
        Ok(())
    }
}

/// How to render a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// KEP-5981: extractors, locks in the scheduler.
    Native,
    /// The driver workaround: no extractors; each device carries a `group` attribute, clean
    /// devices are published as placeholders with room for one claim, and every claim selects the
    /// placeholders and the devices of its own group.
    Workaround,
}

/// One running pod: node index, device index, group (unused for `plain`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Index of the node.
    pub node: usize,
    /// Index of the device on the node.
    pub device: usize,
    /// Affinity group.
    pub group: usize,
}

/// A generated workload: the spec, the running pods' placements and the pending pods' groups.
#[derive(Clone, Debug)]
pub struct Workload {
    /// What was asked for.
    pub spec: Spec,
    /// One per running pod, in order (`svc-00000`, ...).
    pub running: Vec<Placement>,
    /// The group of each pending pod (`job-00000`, ...).
    pub pending: Vec<usize>,
    /// What the spec's [`Shapes`] drew (`None` when all are off).
    pub drawn: Option<Drawn>,
}

/// The generator's output.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The `kind: List` document, as JSON text.
    pub cluster: String,
    /// The plugin configuration as JSON text (empty unless extractors are in the configuration).
    pub config: String,
    /// The model behind it.
    pub workload: Workload,
}

/// Generates the cluster for `spec` (the native variant).
pub fn generate(spec: &Spec) -> Result<Generated, String> {
    let workload = Workload::new(spec)?;
    Ok(Generated {
        cluster: workload.render(Variant::Native)?,
        config: workload.config(),
        workload,
    })
}

/// SplitMix64: a small, well-mixed deterministic random generator. The generator draws every
/// random choice of a workload from it (seeded per spec); randomized tests use it to draw specs.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose state starts at `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (the next value modulo `n`); `n` must not be 0.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `lo..=hi` (`lo + below(hi - lo + 1)`); `lo` must not exceed `hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `num / den` (the next value modulo `den` is below `num`).
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next_u64() % den < num
    }
}

impl Workload {
    /// Places the running pods and draws the pending pods' groups.
    pub fn new(spec: &Spec) -> Result<Workload, String> {
        spec.check()?;
        let mut rng = Rng(spec.seed ^ 0x5981_5075_0000_0000);
        let shape = spec.profile.shape();
        let shares = shape.capacity.as_ref().map_or(1, |c| c.shares);
        let plain = spec.profile == Profile::Plain;
        let groups = if plain { 1 } else { spec.groups };
        let dpn = spec.devices_per_node;
        let total = spec.nodes * dpn;
        // Per device: (group, used shares); per node: devices in use (for the gpu power budget).
        let mut device: Vec<(usize, usize)> = vec![(0, 0); total];
        let mut open_per_node = vec![0usize; spec.nodes];
        let open_limit = if spec.profile == Profile::Gpu {
            gpu_open_limit(dpn)
        } else {
            dpn
        };
        if spec.running > total * shares {
            return Err(format!(
                "--running {} is more than the cluster's {} shares",
                spec.running,
                total * shares
            ));
        }
        let mut running = Vec::with_capacity(spec.running);
        while running.len() < spec.running {
            let mut placed = false;
            for _ in 0..256 {
                let idx = rng.below(total);
                let (node, dev) = (idx / dpn, idx % dpn);
                let (g, used) = device[idx];
                let group = if used == 0 {
                    if open_per_node[node] >= open_limit {
                        continue;
                    }
                    rng.below(groups)
                } else if used < shares && !plain {
                    g
                } else {
                    continue;
                };
                if used == 0 {
                    open_per_node[node] += 1;
                }
                device[idx] = (group, used + 1);
                running.push(Placement {
                    node,
                    device: dev,
                    group,
                });
                placed = true;
                break;
            }
            if !placed {
                return Err(format!(
                    "--running {}: placed {} running pods, then found no free device in 256 tries; \
                     the cluster is too full",
                    spec.running,
                    running.len()
                ));
            }
        }
        let mut pending = Vec::with_capacity(spec.pods);
        while pending.len() < spec.pods {
            let group = rng.below(groups);
            let run = spec.burst.max(1).min(spec.pods - pending.len());
            pending.extend(std::iter::repeat_n(group, run));
        }
        let drawn = spec.shapes.any().then(|| draw(spec));
        Ok(Workload {
            spec: spec.clone(),
            running,
            pending,
            drawn,
        })
    }

    /// The shape of pending pod `k`'s claim.
    pub fn claim_shape(&self, k: usize) -> ClaimShape {
        self.drawn
            .as_ref()
            .and_then(|d| d.claims.get(k).copied())
            .unwrap_or(ClaimShape::Basic)
    }

    /// Where node `n`'s pool applies extractors.
    pub fn pool_extractors(&self, n: usize) -> PoolExtractors {
        self.drawn
            .as_ref()
            .and_then(|d| d.pools.get(n).copied())
            .unwrap_or(PoolExtractors::Every)
    }

    fn shape(&self) -> &'static Shape {
        self.spec.profile.shape()
    }

    fn plain(&self) -> bool {
        self.spec.profile == Profile::Plain
    }

    /// The driver name of the workload's devices.
    pub fn driver(&self) -> &'static str {
        self.shape().driver
    }

    /// Shares per device (1 for `plain`).
    pub fn shares(&self) -> usize {
        self.shape().capacity.as_ref().map_or(1, |c| c.shares)
    }

    /// Name of node `n`.
    pub fn node_name(&self, n: usize) -> String {
        format!("node-{n:05}")
    }

    /// Name of device `d` (on any node).
    pub fn device_name(&self, d: usize) -> String {
        let shape = self.shape();
        match self.spec.profile {
            Profile::Nic => format!("{}{}", shape.device_prefix, d + 1),
            _ => format!("{}{d}", shape.device_prefix),
        }
    }

    /// Namespace of every pod and claim.
    pub fn namespace(&self) -> &'static str {
        "batch"
    }

    /// `namespace/name` of pending pod `k`.
    pub fn pending_pod(&self, k: usize) -> String {
        format!("batch/job-{k:05}")
    }

    /// Whether pending pod `k` uses a direct claim (every fourth, not for `plain`).
    pub fn direct_claim(&self, k: usize) -> bool {
        !self.plain() && k % 4 == 3
    }

    /// `namespace/name` of the claim pending pod `k` gets (generated from a template, or direct).
    pub fn pending_claim(&self, k: usize) -> String {
        if self.direct_claim(k) {
            format!("batch/job-{k:05}-claim")
        } else {
            format!("batch/job-{k:05}-{}", self.shape().request)
        }
    }

    /// The label of a group: its values joined with `,` (what the workaround's attribute holds).
    pub fn group_label(&self, group: usize) -> String {
        self.values(group)
            .iter()
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The affinity values of a group: (config field, value) per key.
    fn values(&self, group: usize) -> Vec<(&'static str, String)> {
        self.shape().keys[..self.spec.affinity_keys]
            .iter()
            .enumerate()
            .map(|(j, key)| {
                let v = if j == 0 {
                    format!("{key}-{group:03}")
                } else {
                    // Further keys vary with the group too (a group is the whole tuple).
                    format!("{key}-{:03}", (group * 7 + j) % self.spec.groups.max(1))
                };
                (*key, v)
            })
            .collect()
    }

    /// The plugin configuration: extractors per driver, or empty.
    pub fn config(&self) -> String {
        if !self.spec.extractors_in_config || self.plain() {
            return String::new();
        }
        if self.drawn.is_none() {
            return json!({"sharingAffinity": [{"driver": self.driver(), "cel": self.extractor_cel()}]})
                .to_string();
        }
        // With shapes, one entry per pool that applies extractors, scoped to it.
        let entries: Vec<Value> = (0..self.spec.nodes)
            .filter(|&n| self.pool_extractors(n) != PoolExtractors::None)
            .map(|n| {
                let mut e = self.pool_extractor(n);
                e["driver"] = json!(self.driver());
                e["pool"] = json!(self.node_name(n));
                e
            })
            .collect();
        json!({ "sharingAffinity": entries }).to_string()
    }

    /// Node `n`'s extractor entry (`cel`, and `selector` for a pool applying it to `fast` devices).
    fn pool_extractor(&self, n: usize) -> Value {
        let mut e = json!({"cel": self.extractor_cel()});
        if self.pool_extractors(n) == PoolExtractors::Fast {
            e["selector"] = json!({"cel": {"expression": self.tier_test("fast")}});
        }
        e
    }

    /// CEL: the device's `tier` is `tier`.
    fn tier_test(&self, tier: &str) -> String {
        format!("device.attributes[\"{}\"].tier == \"{tier}\"", self.driver())
    }

    fn extractor_cel(&self) -> Value {
        let shape = self.shape();
        let guard = format!(
            "object.apiVersion == \"{}/v1\" && object.kind == \"{}\"",
            shape.driver, shape.config_kind
        );
        let mut map = serde_json::Map::new();
        for key in &shape.keys[..self.spec.affinity_keys] {
            map.insert(
                (*key).to_string(),
                Value::String(format!("{guard} ? object.{key} : \"\"")),
            );
        }
        Value::Object(map)
    }

    /// The per-device state the running pods leave: (group, shares used) per node × device.
    pub fn initial_devices(&self) -> Vec<(usize, usize)> {
        let dpn = self.spec.devices_per_node;
        let mut device = vec![(0, 0); self.spec.nodes * dpn];
        for p in &self.running {
            let slot = &mut device[p.node * dpn + p.device];
            *slot = (p.group, slot.1 + 1);
        }
        device
    }

    /// Renders the whole cluster as a `kind: List` document.
    pub fn render(&self, variant: Variant) -> Result<String, String> {
        if variant == Variant::Workaround && self.plain() {
            return Err("the driver workaround needs a sharing profile, not plain".into());
        }
        if variant == Variant::Workaround && self.spec.shapes.any() {
            return Err("the driver workaround is not rendered with further shapes".into());
        }
        let shape = self.shape();
        let dpn = self.spec.devices_per_node;
        let devices = self.initial_devices();
        // Items are serialized one by one: no document-sized tree in memory.
        let mut items = Items(String::with_capacity(self.spec.nodes * 16_384));
        for n in 0..self.spec.nodes {
            items.push(self.node(n));
        }
        let mut class_sel = format!("device.driver == \"{}\"", shape.driver);
        if !shape.class_selector.is_empty() {
            class_sel.push_str(" && ");
            class_sel.push_str(shape.class_selector);
        }
        items.push(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": meta(&self.uid("DeviceClass", "", shape.class), shape.class, None, -80_000),
            "spec": {"selectors": [{"cel": {"expression": class_sel}}]}
        }));
        for n in 0..self.spec.nodes {
            let state: Vec<DeviceState> = (0..dpn)
                .map(|d| {
                    let (g, used) = devices[n * dpn + d];
                    match variant {
                        Variant::Native => DeviceState::Native,
                        Variant::Workaround if used == 0 => DeviceState::Placeholder,
                        Variant::Workaround => DeviceState::Opened(g),
                    }
                })
                .collect();
            for s in self.node_slices(n, variant, &state, 1) {
                items.push(s);
            }
        }
        // Running pods' claims (allocated), direct claims of pending pods, templates, pods.
        for (k, p) in self.running.iter().enumerate() {
            items.push(self.running_claim(k, p, variant));
        }
        for k in 0..self.spec.pods {
            if self.direct_claim(k) {
                let name = format!("job-{k:05}-claim");
                let spec = self.pending_claim_spec(k, variant);
                items.push(json!({
                    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": meta(&self.uid("ResourceClaim", "batch", &name), &name, Some("batch"), k as i64 - 600),
                    "spec": spec, "status": {}
                }));
            }
        }
        let templates = if self.plain() { 1 } else { self.spec.groups };
        for g in 0..templates {
            let name = self.template_name(g);
            items.push(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": meta(&self.uid("ResourceClaimTemplate", "batch", &name), &name, Some("batch"), -3600),
                "spec": {"metadata": {}, "spec": self.claim_spec(g, variant)}
            }));
        }
        // Shaped claims: one template per pending pod that uses one.
        for k in 0..self.spec.pods {
            if self.claim_shape(k) != ClaimShape::Basic && !self.direct_claim(k) {
                let name = self.pending_template(k);
                items.push(json!({
                    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                    "metadata": meta(&self.uid("ResourceClaimTemplate", "batch", &name), &name, Some("batch"), -3600),
                    "spec": {"metadata": {}, "spec": self.pending_claim_spec(k, variant)}
                }));
            }
        }
        for (k, p) in self.running.iter().enumerate() {
            items.push(self.running_pod(k, p));
        }
        for k in 0..self.spec.pods {
            items.push(self.pending_pod_object(k));
        }
        Ok(format!(
            r#"{{"apiVersion":"v1","kind":"List","metadata":{{"resourceVersion":""}},"items":[{}]}}"#,
            items.0
        ))
    }

    /// The template pending pod `k` uses (when it uses one): its group's, or for a shaped claim its own.
    fn pending_template(&self, k: usize) -> String {
        if self.claim_shape(k) == ClaimShape::Basic {
            self.template_name(self.pending[k])
        } else {
            format!("{}-job-{k:05}", self.shape().template_prefix)
        }
    }

    fn template_name(&self, group: usize) -> String {
        if self.plain() {
            self.shape().template_prefix.to_string()
        } else {
            format!("{}-g{group:03}", self.shape().template_prefix)
        }
    }

    /// A deterministic UUID-shaped identity for an object.
    fn uid(&self, kind: &str, ns: &str, name: &str) -> String {
        let mut h = Rng(self.spec.seed);
        let mut acc = 0xcbf2_9ce4_8422_2325u64;
        for b in kind
            .bytes()
            .chain([0])
            .chain(ns.bytes())
            .chain([0])
            .chain(name.bytes())
        {
            acc = (acc ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        h.0 ^= acc;
        let (a, b) = (h.next_u64(), h.next_u64());
        format!(
            "{:08x}-{:04x}-5{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            0x8000 | ((b >> 48) & 0x3fff),
            b & 0xffff_ffff_ffff
        )
    }

    fn node(&self, n: usize) -> Value {
        let name = self.node_name(n);
        let zone = format!("zone-{}", ["a", "b", "c"][n % 3]);
        let mut m = meta(&self.uid("Node", "", &name), &name, None, -86_400);
        m["labels"] = json!({
            "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "m6i.8xlarge", "topology.kubernetes.io/zone": zone
        });
        json!({
            "apiVersion": "v1", "kind": "Node", "metadata": m,
            "spec": {"podCIDR": format!("10.{}.{}.0/24", 64 + n / 256, n % 256)},
            "status": {
                "allocatable": {"cpu": "32", "memory": "129834920Ki", "pods": "110"},
                "capacity": {"cpu": "32", "memory": "130039720Ki", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "lastHeartbeatTime": ts(-60), "lastTransitionTime": ts(-86_000)}],
                "nodeInfo": {"architecture": "amd64", "kubeletVersion": "v1.36.2",
                             "containerRuntimeVersion": "containerd://2.1.4", "operatingSystem": "linux"}
            }
        })
    }

    /// The slices of node `n`'s pool at pool generation `generation`: the device slice, for `gpu`
    /// the counter slice, and (native variant, extractors not in the configuration) the metadata
    /// slice. `state` gives each device's published state.
    pub fn node_slices(
        &self,
        n: usize,
        variant: Variant,
        state: &[DeviceState],
        generation: i64,
    ) -> Vec<Value> {
        let counters = self.spec.profile == Profile::Gpu;
        let metadata = variant == Variant::Native
            && !self.plain()
            && !self.spec.extractors_in_config
            && self.pool_extractors(n) != PoolExtractors::None;
        let count = 1 + i64::from(counters) + i64::from(metadata);
        let devices: Vec<Value> = state
            .iter()
            .enumerate()
            .map(|(d, s)| self.device(n, d, *s))
            .collect();
        let mut out = vec![self.slice(n, "dev", count, generation, json!({"devices": devices}))];
        if counters {
            let total = GPU_WATTS * gpu_open_limit(self.spec.devices_per_node) as i64;
            out.push(self.slice(
                n,
                "ctr",
                count,
                generation,
                json!({"sharedCounters": [{"name": "power", "counters": {"watts": {"value": total.to_string()}}}]}),
            ));
        }
        if metadata {
            out.push(self.slice(
                n,
                "meta",
                count,
                generation,
                json!({"sharingAffinity": [self.pool_extractor(n)]}),
            ));
        }
        out
    }

    fn slice(&self, n: usize, part: &str, count: i64, generation: i64, body: Value) -> Value {
        let shape = self.shape();
        let node = self.node_name(n);
        let name = format!("{node}-{}-{part}", shape.driver);
        let mut m = meta(&self.uid("ResourceSlice", "", &name), &name, None, -70_000);
        m["generateName"] = json!(format!("{node}-{}-", shape.driver));
        m["ownerReferences"] = json!([{"apiVersion": "v1", "controller": true, "kind": "Node",
                                        "name": node, "uid": self.uid("Node", "", &node)}]);
        let mut spec = json!({
            "driver": shape.driver, "nodeName": node,
            "pool": {"generation": generation, "name": node, "resourceSliceCount": count}
        });
        if let (Value::Object(spec), Value::Object(body)) = (&mut spec, body) {
            spec.extend(body);
        }
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": m, "spec": spec})
    }

    fn device(&self, n: usize, d: usize, state: DeviceState) -> Value {
        let shape = self.shape();
        let name = self.device_name(d);
        let dom = shape.driver;
        let mut attrs = serde_json::Map::new();
        let mut put = |k: &str, v: Value| {
            attrs.insert(format!("{dom}/{k}"), v);
        };
        match self.spec.profile {
            Profile::Nic => {
                put("ifName", json!({"string": name}));
                put("linkSpeedGbps", json!({"int": 100}));
                put("model", json!({"string": "cx7"}));
                put(
                    "pciAddress",
                    json!({"string": format!("0000:{:02x}:00.0", 0x3b + d)}),
                );
            }
            Profile::Gpu => {
                put("driverVersion", json!({"version": "570.124.6"}));
                put("model", json!({"string": "h100"}));
                put(
                    "uuid",
                    json!({"string": format!("GPU-{}", &self.uid("gpu", "", &name)[..18])}),
                );
            }
            Profile::Fpga => {
                put("family", json!({"string": "agilex"}));
                put("slot", json!({"int": d}));
            }
            Profile::Rdma => {
                put("linkLayer", json!({"string": "InfiniBand"}));
                put("port", json!({"int": 1}));
                put(
                    "guid",
                    json!({"string": format!("0x{:016x}", 0x0c42_a103_0000_0000u64 + d as u64)}),
                );
            }
            Profile::Plain => {
                put("driverVersion", json!({"version": "1.0.0"}));
                put("index", json!({"int": d}));
            }
        }
        if let Some(drawn) = &self.drawn {
            let idx = n * self.spec.devices_per_node + d;
            let tier = if drawn.fast.get(idx).copied().unwrap_or(false) {
                "fast"
            } else {
                "slow"
            };
            put("tier", json!({"string": tier}));
            put("numa", json!({"int": drawn.numa.get(idx).copied().unwrap_or(0)}));
        }
        let mut dev = json!({"name": name, "attributes": attrs});
        if let Some(cap) = &shape.capacity {
            let policy: Value = serde_json::from_str(cap.policy).unwrap_or(Value::Null);
            let total = match state {
                DeviceState::Placeholder => cap.request,
                _ => cap.total,
            };
            dev["allowMultipleAllocations"] = json!(true);
            dev["capacity"] =
                json!({format!("{dom}/{}", cap.name): {"value": total, "requestPolicy": policy}});
        } else {
            dev["capacity"] = json!({"memory": {"value": "1Gi"}});
        }
        if let Some(group) = match state {
            DeviceState::Native => None,
            DeviceState::Placeholder => Some(String::new()),
            DeviceState::Opened(g) => Some(self.group_label(g)),
        } {
            dev["attributes"][format!("{dom}/group")] = json!({"string": group});
        }
        if self.spec.profile == Profile::Gpu {
            dev["consumesCounters"] =
                json!([{"counterSet": "power", "counters": {"watts": {"value": GPU_WATTS.to_string()}}}]);
        }
        dev
    }

    fn claim_spec(&self, group: usize, variant: Variant) -> Value {
        let shape = self.shape();
        let mut exactly = json!({"allocationMode": "ExactCount", "count": 1, "deviceClassName": shape.class});
        if let Some(cap) = &shape.capacity {
            exactly["capacity"] =
                json!({"requests": {format!("{}/{}", shape.driver, cap.name): cap.request}});
        }
        if variant == Variant::Workaround {
            let attr = format!("device.attributes[\"{}\"].group", shape.driver);
            exactly["selectors"] = json!([{"cel": {"expression":
                format!("{attr} == \"\" || {attr} == \"{}\"", self.group_label(group))}}]);
        }
        let mut devices = json!({"requests": [{"name": shape.request, "exactly": exactly}]});
        if !self.plain() {
            devices["config"] =
                json!([{"opaque": {"driver": shape.driver, "parameters": self.parameters(group)}}]);
        }
        json!({"devices": devices})
    }

    /// The spec of pending pod `k`'s claim, in its drawn shape.
    fn pending_claim_spec(&self, k: usize, variant: Variant) -> Value {
        let shape = self.claim_shape(k);
        let group = self.pending[k];
        if shape == ClaimShape::Basic {
            return self.claim_spec(group, variant);
        }
        let name = self.shape().request;
        let one = |count: Option<i64>, tier: Option<&str>| self.request_body(count, tier);
        let mut constraints = Vec::new();
        let requests = match shape {
            ClaimShape::Basic | ClaimShape::Unconfigured => {
                vec![json!({"name": name, "exactly": one(Some(1), None)})]
            }
            ClaimShape::Selector(tier) => vec![json!({"name": name, "exactly": one(Some(1), Some(tier))})],
            ClaimShape::FirstAvailable => {
                let mut two = one(Some(2), Some("fast"));
                two["name"] = json!("two-fast");
                let mut any = one(Some(1), None);
                any["name"] = json!("one");
                vec![json!({"name": name, "firstAvailable": [two, any]})]
            }
            ClaimShape::All { fast_only } => {
                vec![json!({"name": name, "exactly": one(None, fast_only.then_some("fast"))})]
            }
            ClaimShape::Count2 => vec![json!({"name": name, "exactly": one(Some(2), None)})],
            ClaimShape::Match | ClaimShape::Distinct => {
                let rule = if shape == ClaimShape::Match {
                    "matchAttribute"
                } else {
                    "distinctAttribute"
                };
                constraints.push(json!({"requests": ["a", "b"], rule: format!("{}/numa", self.driver())}));
                vec![
                    json!({"name": "a", "exactly": one(Some(1), None)}),
                    json!({"name": "b", "exactly": one(Some(1), None)}),
                ]
            }
        };
        let mut devices = json!({ "requests": requests });
        if !constraints.is_empty() {
            devices["constraints"] = json!(constraints);
        }
        if !self.plain() && shape != ClaimShape::Unconfigured {
            devices["config"] =
                json!([{"opaque": {"driver": self.driver(), "parameters": self.parameters(group)}}]);
        }
        json!({ "devices": devices })
    }

    /// One request's device part: `count` devices (`None`: `allocationMode: All`) of the class,
    /// with the profile's capacity request and, with `tier`, a selector on it.
    fn request_body(&self, count: Option<i64>, tier: Option<&str>) -> Value {
        let shape = self.shape();
        let mut body = json!({"deviceClassName": shape.class});
        match count {
            Some(count) => {
                body["allocationMode"] = json!("ExactCount");
                body["count"] = json!(count);
            }
            None => body["allocationMode"] = json!("All"),
        }
        if let Some(tier) = tier {
            body["selectors"] = json!([{"cel": {"expression": self.tier_test(tier)}}]);
        }
        if let Some(cap) = &shape.capacity {
            body["capacity"] = json!({"requests": {format!("{}/{}", shape.driver, cap.name): cap.request}});
        }
        body
    }

    fn parameters(&self, group: usize) -> Value {
        let shape = self.shape();
        let mut p = json!({"apiVersion": format!("{}/v1", shape.driver), "kind": shape.config_kind});
        for (key, v) in self.values(group) {
            p[key] = json!(v);
        }
        p
    }

    fn running_claim(&self, k: usize, p: &Placement, variant: Variant) -> Value {
        let shape = self.shape();
        let pod = format!("svc-{k:05}");
        let name = format!("{pod}-{}", shape.request);
        let node = self.node_name(p.node);
        let mut result = json!({"device": self.device_name(p.device), "driver": shape.driver,
                                "pool": node, "request": shape.request});
        if let Some(cap) = &shape.capacity {
            result["shareID"] = json!(self.uid("share", "batch", &name));
            result["consumedCapacity"] = json!({format!("{}/{}", shape.driver, cap.name): cap.request});
        }
        let spec = self.claim_spec(p.group, variant);
        let mut devices = json!({"results": [result]});
        if let Some(cfg) = spec["devices"]["config"].as_array() {
            let cfg: Vec<Value> = cfg
                .iter()
                .map(|c| json!({"source": "FromClaim", "opaque": c["opaque"]}))
                .collect();
            devices["config"] = json!(cfg);
        }
        let created = -40_000 + k as i64;
        let mut m = meta(
            &self.uid("ResourceClaim", "batch", &name),
            &name,
            Some("batch"),
            created + 1,
        );
        m["annotations"] = json!({"resource.kubernetes.io/pod-claim-name": shape.request});
        m["generateName"] = json!(format!("{pod}-{}-", shape.request));
        m["finalizers"] = json!(["resource.kubernetes.io/delete-protection"]);
        m["ownerReferences"] = json!([{"apiVersion": "v1", "blockOwnerDeletion": true, "controller": true,
                                        "kind": "Pod", "name": pod, "uid": self.uid("Pod", "batch", &pod)}]);
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": m, "spec": spec,
            "status": {
                "allocation": {
                    "allocationTimestamp": ts(created + 2),
                    "devices": devices,
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
                },
                "reservedFor": [{"name": pod, "resource": "pods", "uid": self.uid("Pod", "batch", &pod)}]
            }
        })
    }

    fn pod_object(
        &self,
        name: &str,
        created: i64,
        claim: Value,
        node: Option<&str>,
        generated: Option<&str>,
    ) -> Value {
        let shape = self.shape();
        let mut m = meta(&self.uid("Pod", "batch", name), name, Some("batch"), created);
        m["labels"] = json!({"app.kubernetes.io/name": if node.is_some() { "svc" } else { "job" }});
        let mut spec = json!({
            "containers": [{"name": "main", "image": "registry.example.com/worker:2.4.1",
                            "imagePullPolicy": "IfNotPresent",
                            "resources": {"claims": [{"name": shape.request}]},
                            "terminationMessagePath": "/dev/termination-log",
                            "terminationMessagePolicy": "File"}],
            "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "priority": 0,
            "resourceClaims": [claim], "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
                {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}]
        });
        let status = match (node, generated) {
            (Some(node), generated) => {
                spec["nodeName"] = json!(node);
                let mut s = json!({"phase": "Running", "qosClass": "BestEffort", "startTime": ts(created + 2),
                                   "conditions": [{"type": "PodScheduled", "status": "True",
                                                   "lastProbeTime": null, "lastTransitionTime": ts(created + 2)}]});
                if let Some(claim) = generated {
                    s["resourceClaimStatuses"] = json!([{"name": shape.request, "resourceClaimName": claim}]);
                }
                s
            }
            (None, _) => json!({"phase": "Pending", "qosClass": "BestEffort"}),
        };
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": m, "spec": spec, "status": status})
    }

    fn running_pod(&self, k: usize, p: &Placement) -> Value {
        let shape = self.shape();
        let name = format!("svc-{k:05}");
        let claim_name = format!("{name}-{}", shape.request);
        let claim = json!({"name": shape.request, "resourceClaimTemplateName": self.template_name(p.group)});
        self.pod_object(
            &name,
            -40_000 + k as i64,
            claim,
            Some(&self.node_name(p.node)),
            Some(&claim_name),
        )
    }

    fn pending_pod_object(&self, k: usize) -> Value {
        let shape = self.shape();
        let name = format!("job-{k:05}");
        let claim = if self.direct_claim(k) {
            json!({"name": shape.request, "resourceClaimName": format!("{name}-claim")})
        } else {
            json!({"name": shape.request, "resourceClaimTemplateName": self.pending_template(k)})
        };
        self.pod_object(&name, k as i64, claim, None, None)
    }
}

/// Serialized items, comma-separated.
struct Items(String);

impl Items {
    fn push(&mut self, item: Value) {
        if !self.0.is_empty() {
            self.0.push(',');
        }
        self.0.push_str(&item.to_string());
    }
}

/// How a device is published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceState {
    /// Native variant: the device as the driver describes it; locks live in the scheduler.
    Native,
    /// Workaround: a clean device, published with room for one claim and an empty `group`.
    Placeholder,
    /// Workaround: a device the driver opened for a group: full capacity, `group` set.
    Opened(usize),
}

/// Draws what `spec.shapes` asks for, from a random stream apart from the running pods' and
/// groups' (so that those stay the same with and without shapes).
fn draw(spec: &Spec) -> Drawn {
    let mut rng = Rng(spec.seed ^ 0x5ba9_e500_0000_0000);
    let modes = [PoolExtractors::Every, PoolExtractors::None, PoolExtractors::Fast];
    let pools = (0..spec.nodes)
        .map(|_| {
            if spec.shapes.pool_extractors {
                modes[rng.below(modes.len())]
            } else {
                PoolExtractors::Every
            }
        })
        .collect();
    let total = spec.nodes * spec.devices_per_node;
    let fast = (0..total).map(|_| rng.below(2) == 0).collect();
    let numa = (0..total).map(|_| u8::from(rng.below(2) == 1)).collect();
    let shapes = spec.shapes.claims();
    let claims = (0..spec.pods).map(|_| shapes[rng.below(shapes.len())]).collect();
    Drawn {
        pools,
        fast,
        numa,
        claims,
    }
}

/// GPUs per node that the power counter set lets be in use at once (three quarters, at least 1).
fn gpu_open_limit(devices_per_node: usize) -> usize {
    (devices_per_node * 3).div_ceil(4).max(1)
}

/// Object metadata with a fixed resourceVersion (the replay does not read it).
fn meta(uid: &str, name: &str, namespace: Option<&str>, created: i64) -> Value {
    let mut m = json!({"name": name, "uid": uid, "creationTimestamp": ts(created), "resourceVersion": "1"});
    if let Some(ns) = namespace {
        m["namespace"] = json!(ns);
    }
    m
}

/// RFC 3339 time `offset` seconds after 2026-09-14T08:00:00Z.
fn ts(offset: i64) -> String {
    // Days since 1970-01-01 of 2026-09-14, and seconds into that day.
    const BASE_DAYS: i64 = 20_710;
    const BASE_SECS: i64 = 8 * 3600;
    let total = BASE_DAYS * 86_400 + BASE_SECS + offset;
    let (days, secs) = (total.div_euclid(86_400), total.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let mut out = String::with_capacity(20);
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    out
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Counts of what a workload holds, for the CLI's summary line.
pub fn summary(w: &Workload) -> BTreeMap<&'static str, usize> {
    let devices = w.initial_devices();
    BTreeMap::from([
        ("nodes", w.spec.nodes),
        ("devices", devices.len()),
        ("devices in use", devices.iter().filter(|(_, u)| *u > 0).count()),
        ("running pods", w.running.len()),
        ("pending pods", w.pending.len()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_from_the_base() {
        assert_eq!(ts(0), "2026-09-14T08:00:00Z");
        assert_eq!(ts(-86_400), "2026-09-13T08:00:00Z");
        assert_eq!(ts(16 * 3600 + 61), "2026-09-15T00:01:01Z");
        assert_eq!(ts(-40_000), "2026-09-13T20:53:20Z");
    }

    #[test]
    fn bad_specs_are_refused_with_the_flag_name() {
        let cases: &[(Spec, &str)] = &[
            (Spec::new(0, 8), "--nodes"),
            (Spec::new(1, 0), "--devices-per-node"),
            (
                Spec {
                    affinity_keys: 9,
                    ..Spec::new(2, 2)
                },
                "--affinity-keys",
            ),
            (
                Spec {
                    groups: 0,
                    ..Spec::new(2, 2)
                },
                "--groups",
            ),
            (
                Spec {
                    running: 2 * 2 * 16 + 1,
                    ..Spec::new(2, 2)
                },
                "--running",
            ),
            (
                Spec {
                    profile: Profile::Plain,
                    extractors_in_config: true,
                    ..Spec::new(2, 2)
                },
                "--extractors-in-config",
            ),
        ];
        for (spec, flag) in cases {
            let err = generate(spec).err().unwrap_or_default();
            assert!(err.contains(flag), "{spec:?}: {err}");
        }
    }

    #[test]
    fn rng_is_splitmix64_and_its_helpers_stay_in_range() {
        // SplitMix64's published outputs for seed 0.
        let mut r = Rng::new(0);
        assert_eq!(
            [r.next_u64(), r.next_u64(), r.next_u64()],
            [
                0xe220_a839_7b1d_cdaf,
                0x6e78_9e6a_a1b9_65f4,
                0x06c4_5d18_8009_454f
            ]
        );
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        for _ in 0..1000 {
            let x = a.next_u64();
            assert_eq!(b.below(7), (x % 7) as usize);
            let x = a.next_u64();
            assert_eq!(b.range(3, 9), 3 + (x % 7) as usize);
            let x = a.next_u64();
            assert_eq!(b.chance(3, 8), x % 8 < 3);
        }
        let mut r = Rng::new(5981);
        let draws: Vec<usize> = (0..1000).map(|_| r.range(2, 5)).collect();
        assert!(draws.iter().all(|d| (2..=5).contains(d)));
        assert!((2..=5).all(|v| draws.contains(&v)), "every value is drawn");
        assert!((0..100).all(|_| !r.chance(0, 4) && r.chance(4, 4)));
    }

    #[test]
    fn uids_are_distinct_and_uuid_shaped() {
        let w = Workload::new(&Spec::new(2, 2)).unwrap();
        let a = w.uid("Pod", "batch", "a");
        assert_eq!(a.len(), 36);
        assert_ne!(a, w.uid("Pod", "batch", "b"));
        assert_ne!(a, w.uid("Pod", "", "batcha"));
    }
}
