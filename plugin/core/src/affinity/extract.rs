//! Extractors and what claims want: which CEL extractors (or structured keys) apply to a
//! device, what each yields for a request of a claim, and the values a request wants on a
//! device ([`wanted`]), or why it is not viable ([`Rejection`]).
//!
//! Drivers publish CEL *extractors* per pool (`ResourceSlice.spec.sharingAffinity[]` in metadata
//! slices, or the plugin configuration for API servers without the field). An extractor applies to
//! a device when its selector matches it (or it has none). For a request, each applicable
//! extractor runs its key expressions against every opaque config object of the claim in scope for
//! the request; a non-empty string contributes `key → value`, `""` means "not handled".
//!
//! The structured-configuration design is a second way to declare affinity: a device lists
//! `sharingAffinity.attributeKeys`, and claims give the values in `config[].structured.attributes`
//! (scoped by `requests` as `opaque`). Each declared key becomes an implicit extractor of the pool
//! ([`StructuredKey`]) whose value is the structured string attribute in scope, so gating,
//! conflicts, locks, reconstruction and scoring are the same machinery. A device that declares
//! keys and also has a CEL extractor applying to it is not viable.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::cel::{CelCache, CelObject};
use crate::config::Config;
use crate::constraints::RequestScope;
use crate::index::{DevIdx, Index};
use crate::model::{DeviceAttribute, DeviceSelector, Map, ResourceClaim};

/// KEP limit: extractors per metadata slice (and per configuration entry set of one pool).
pub const MAX_EXTRACTORS: usize = 8;
/// KEP limit: keys per extractor.
pub const MAX_KEYS: usize = 8;

/// Affinity values: key → non-empty value.
pub type Values = BTreeMap<String, String>;

/// Formats values as `k1=v1, k2=v2`.
pub fn show(values: &Values) -> String {
    values
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
/// Checks the KEP limits and compiles every expression. The error starts with the field path.
pub(crate) fn validate_extractor(
    cache: &CelCache,
    cel: &Map<String, String>,
    selector: Option<&DeviceSelector>,
) -> Result<(), String> {
    if cel.is_empty() {
        return Err("cel: must have at least one key".into());
    }
    if cel.len() > MAX_KEYS {
        return Err(format!("cel: {} keys, at most {MAX_KEYS} allowed", cel.len()));
    }
    for (key, expr) in cel {
        if !is_c_identifier(key) {
            return Err(format!(
                "cel.{key}: key must be a C identifier of at most 32 characters"
            ));
        }
        cache
            .extractor(expr)
            .map_err(|e| format!("cel.{key}: {expr:?}: {e}"))?;
    }
    if let Some(sel) = selector {
        cache
            .selector(&sel.cel.expression)
            .map_err(|e| format!("selector.cel.expression: {:?}: {e}", sel.cel.expression))?;
    }
    Ok(())
}

pub(crate) fn is_c_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Index of an extractor in [`Extractors::list`].
pub type ExtId = usize;

/// One extractor in effect.
#[derive(Clone, Debug)]
pub struct Extractor {
    /// Where it comes from (for messages).
    pub source: String,
    /// Selector expression, if any.
    pub selector: Option<String>,
    /// Key → expression (for a structured extractor: its one key → [`structured_marker`]),
    /// one copy for all pools whose extractors have the same keys and expressions.
    pub keys: Arc<Map<String, String>>,
    /// An implicit extractor of the structured design: reads the structured claim attribute
    /// named by its key, from configs of this driver; applies to the devices that list the key in
    /// `sharingAffinity.attributeKeys`.
    pub structured: Option<StructuredKey>,
}

/// The key of an implicit structured extractor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StructuredKey {
    /// The pool's driver: only structured configs for this driver are read.
    pub driver: String,
    /// The fully qualified attribute name (also the lock key).
    pub name: String,
}

/// The expression slot of a structured extractor's key (no CEL is run for it). Keys of structured
/// extractors are qualified names (with a `/`), so they never equal a CEL extractor's key.
pub fn structured_marker(driver: &str) -> String {
    format!("structured attribute for driver {driver}")
}

/// `name` qualified with `domain` when it has none (a name without a domain belongs to the
/// driver's domain).
pub fn qualify(domain: &str, name: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("{domain}/{name}")
    }
}

/// Checks a QualifiedName: a C identifier of at most 32 characters, optionally prefixed by a
/// DNS subdomain of at most 63 characters and `/`.
fn check_qualified_name(name: &str) -> Result<(), String> {
    let (domain, id) = match name.split_once('/') {
        Some((d, i)) => (Some(d), i),
        None => (None, name),
    };
    if let Some(d) = domain {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if d.is_empty() || d.len() > 63 || !d.split('.').all(label_ok) {
            return Err(format!(
                "{name:?}: the domain must be a DNS subdomain of at most 63 characters"
            ));
        }
    }
    if !is_c_identifier(id) {
        return Err(format!(
            "{name:?}: the name must be a C identifier of at most 32 characters"
        ));
    }
    Ok(())
}

/// The qualified keys a device declares in `sharingAffinity.attributeKeys` (qualified with the
/// driver), or why the declaration is invalid. At most [`MAX_KEYS`], no duplicates.
pub fn declared_keys(driver: &str, device: &crate::model::Device) -> Result<Vec<String>, String> {
    let Some(sa) = &device.sharing_affinity else {
        return Ok(Vec::new());
    };
    let keys = &sa.attribute_keys;
    if keys.len() > MAX_KEYS {
        return Err(format!(
            "device {}: sharingAffinity.attributeKeys has {} keys, at most {MAX_KEYS} allowed",
            device.name,
            keys.len()
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        check_qualified_name(k)
            .map_err(|e| format!("device {}: sharingAffinity.attributeKeys[{i}]: {e}", device.name))?;
        let q = qualify(driver, k);
        if out.contains(&q) {
            return Err(format!(
                "device {}: sharingAffinity.attributeKeys[{i}]: {q} is listed twice",
                device.name
            ));
        }
        out.push(q);
    }
    Ok(out)
}

/// Why affinity makes a device not viable for a request, or a lock conflict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Extractor set-up error for the device (too many extractors, key collision, selector error).
    Device(String),
    /// The claim gives no value for a key of an applicable extractor.
    MissingKey(String),
    /// Extraction failed (CEL error or non-string).
    Extraction(String),
    /// The device is locked to other values.
    Locked {
        /// The lock.
        lock: Arc<Values>,
        /// What the claim wants.
        wanted: Arc<Values>,
    },
    /// The device has allocations whose values cannot be re-derived.
    Unreconstructable,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Device(e) => write!(f, "sharing affinity misconfigured: {e}"),
            Rejection::MissingKey(k) => write!(f, "claim gives no value for affinity key {k}"),
            Rejection::Extraction(e) => write!(f, "affinity extraction failed: {e}"),
            Rejection::Locked { lock, wanted } => {
                write!(f, "locked to {}, claim wants {}", show(lock), show(wanted))
            }
            Rejection::Unreconstructable => {
                write!(
                    f,
                    "shared by allocations whose affinity cannot be reconstructed; not usable until released"
                )
            }
        }
    }
}

/// An applicable extractor set: its interned id and the extractors.
type AppSet = (u32, Vec<ExtId>);

/// [`Extractors::set_of`]: a device's applicable extractor set in brief.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOf {
    /// No extractor applies.
    Empty,
    /// The set's interned id ([`Extractors::applicable_set`]); not empty.
    Set(u32),
    /// An invalid set (the device is not viable), or an id past the compact codes: see
    /// [`Extractors::applicable_set`].
    Other,
}

impl SetOf {
    const EMPTY: u32 = u32::MAX;
    const OTHER: u32 = u32::MAX - 1;
}

/// The extractors of all pools, and which apply to each device (computed lazily, once).
pub struct Extractors {
    /// All extractors.
    pub list: Vec<Extractor>,
    /// Per pool: its extractors, or an error making all its devices not viable.
    pub per_pool: Vec<Result<Vec<ExtId>, String>>,
    /// Per pool: some device has an invalid `sharingAffinity.attributeKeys` (the pool is then an
    /// affinity pool even without extractors, so that such a device is not viable).
    pub invalid_declarations: Vec<bool>,
    /// Per extractor: its key set's group. Extractors declaring the same keys (the same driver's
    /// pools, usually) yield the same outcome for a request, which is computed once per group.
    pub group: Vec<usize>,
    /// Per group: its first extractor, the one that is evaluated.
    pub groups: Vec<ExtId>,
    applicable: Vec<std::sync::OnceLock<Result<AppSet, String>>>,
    /// Per device: [`Extractors::set_of`]'s answer in four bytes (see [`SetOf`]), so that the
    /// search's device loop reads one cache line for a node's devices where `applicable` takes
    /// several.
    set_codes: Vec<std::sync::OnceLock<u32>>,
    /// Interned applicable sets ([`Extractors::applicable_set`]), by their extractors' groups.
    sets: std::cell::RefCell<crate::hashing::FxHashMap<Vec<usize>, u32>>,
    /// Interned affinity values ([`Extractors::intern`]).
    values: std::cell::RefCell<std::collections::HashSet<Arc<Values>, rustc_hash::FxBuildHasher>>,
    /// The interning table reached its limit: some value sets are not interned.
    interning_full: std::cell::Cell<bool>,
    /// One warning per pool whose configuration extractors were ignored because the driver
    /// publishes extractors for it.
    pub warnings: Vec<String>,
}

impl Extractors {
    /// Most distinct value sets interned; past it new ones are not interned, and [`Extractors::same`]
    /// compares values again.
    const MAX_INTERNED: usize = 4096;

    /// The shared copy of `values`. Every lock and every wanted value set of this index goes
    /// through here, so equal contents are one allocation and [`Extractors::same`] answers by
    /// pointer on the search path. The table lives as long as the index (a slice change builds
    /// new extractors, and with them drops every cache holding values).
    pub fn intern(&self, values: Arc<Values>) -> Arc<Values> {
        let mut table = self.values.borrow_mut();
        if let Some(v) = table.get(&values) {
            return v.clone();
        }
        if table.len() >= Self::MAX_INTERNED {
            self.interning_full.set(true);
            return values;
        }
        table.insert(values.clone());
        values
    }

    /// Whether two value sets from [`Extractors::intern`] are equal: by pointer while every value
    /// set is interned, by content once the table is full.
    pub fn same(&self, a: &Arc<Values>, b: &Arc<Values>) -> bool {
        Arc::ptr_eq(a, b) || (self.interning_full.get() && a == b)
    }

    /// The extractors of each pool: the KEP-5981 metadata-slice extractors when the pool has
    /// any (authoritative: configuration entries for that pool are then ignored, with one warning
    /// per pool), else the configuration's entries for the pool (the fallback for API servers
    /// without the field). The 8-extractor limit applies per metadata slice, as the API validates
    /// it; the union over the slices of a complete pool may exceed 8.
    pub fn build(index: &Index, config: &Config, cel: &CelCache) -> Extractors {
        let mut list = Vec::new();
        let mut keys = KeySets::default();
        let mut per_pool = Vec::with_capacity(index.pools.len());
        let mut gated = Vec::with_capacity(index.pools.len());
        let mut warnings = Vec::new();
        for pool in &index.pools {
            let mut ids = Vec::new();
            let mut err = None;
            let configured: Vec<usize> = config
                .sharing_affinity
                .iter()
                .enumerate()
                .filter(|(_, ex)| {
                    ex.driver == pool.driver && ex.pool.as_ref().is_none_or(|p| *p == pool.name)
                })
                .map(|(i, _)| i)
                .collect();
            if pool.complete && !pool.slice_extractors.is_empty() {
                let mut per_slice: BTreeMap<usize, usize> = BTreeMap::new();
                for ex in &pool.slice_extractors {
                    let source = pool.extractor_source(ex);
                    if let Err(e) = validate_extractor(cel, &ex.spec.cel, ex.spec.selector.as_ref()) {
                        err.get_or_insert(format!("{source}.{e}"));
                    }
                    *per_slice.entry(ex.slice).or_default() += 1;
                    ids.push(list.len());
                    list.push(Extractor {
                        source,
                        selector: ex.spec.selector.as_ref().map(|s| s.cel.expression.clone()),
                        keys: keys.get(&ex.spec.cel),
                        structured: None,
                    });
                }
                if let Some((slice, n)) = per_slice.iter().find(|(_, n)| **n > MAX_EXTRACTORS) {
                    let slice = pool.slices.get(*slice).map_or("?", |s| s.name.as_str());
                    err.get_or_insert(format!(
                        "ResourceSlice {slice} has {n} sharing-affinity extractors, at most {MAX_EXTRACTORS} allowed"
                    ));
                }
                if !configured.is_empty() {
                    let entries: Vec<String> = configured
                        .iter()
                        .map(|i| format!("sharingAffinity[{i}]"))
                        .collect();
                    warnings.push(format!(
                        "pool {}: the driver publishes sharing-affinity extractors, so configuration {} for it {} ignored",
                        pool.id(),
                        entries.join(", "),
                        if entries.len() == 1 { "is" } else { "are" }
                    ));
                }
            } else {
                for &i in &configured {
                    let ex = &config.sharing_affinity[i];
                    ids.push(list.len());
                    list.push(Extractor {
                        source: format!("configuration sharingAffinity[{i}]"),
                        selector: ex.selector.as_ref().map(|s| s.cel.expression.clone()),
                        keys: keys.get(&ex.cel),
                        structured: None,
                    });
                }
                if ids.len() > MAX_EXTRACTORS {
                    err.get_or_insert(format!(
                        "pool {} has {} configured sharing-affinity extractors, at most {MAX_EXTRACTORS} allowed",
                        pool.id(),
                        ids.len()
                    ));
                }
            }
            // The structured design: one implicit extractor per key some device of the pool
            // declares (invalid declarations are reported per device by `applicable`).
            let mut declared = std::collections::BTreeSet::new();
            let mut invalid_declaration = false;
            if pool.complete {
                for s in &pool.slices {
                    for &d in &s.devices {
                        match declared_keys(&pool.driver, &index.device(d).device) {
                            Ok(keys) => declared.extend(keys),
                            Err(_) => invalid_declaration = true,
                        }
                    }
                }
            }
            for name in declared {
                ids.push(list.len());
                list.push(Extractor {
                    source: format!("sharingAffinity.attributeKeys {name} of pool {}", pool.id()),
                    selector: None,
                    keys: keys.get(&Map::from([(name.clone(), structured_marker(&pool.driver))])),
                    structured: Some(StructuredKey {
                        driver: pool.driver.clone(),
                        name,
                    }),
                });
            }
            gated.push(invalid_declaration);
            per_pool.push(match err {
                Some(e) => Err(e),
                None => Ok(ids),
            });
        }
        let applicable = (0..index.devices.len())
            .map(|_| std::sync::OnceLock::new())
            .collect();
        let set_codes = (0..index.devices.len())
            .map(|_| std::sync::OnceLock::new())
            .collect();
        let mut by_keys: crate::hashing::FxHashMap<&Arc<Map<String, String>>, usize> =
            crate::hashing::FxHashMap::default();
        let mut groups = Vec::new();
        let group = list
            .iter()
            .enumerate()
            .map(|(id, ex)| {
                *by_keys.entry(&ex.keys).or_insert_with(|| {
                    groups.push(id);
                    groups.len() - 1
                })
            })
            .collect();
        Extractors {
            list,
            per_pool,
            invalid_declarations: gated,
            group,
            groups,
            applicable,
            set_codes,
            sets: Default::default(),
            values: Default::default(),
            interning_full: Default::default(),
            warnings,
        }
    }

    /// Whether any pool has extractors.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty() && !self.invalid_declarations.contains(&true)
    }

    /// Whether the device's pool has extractors (or an extractor or declaration error).
    pub fn pool_has_affinity(&self, index: &Index, dev: DevIdx) -> bool {
        let pool = index.flags(dev).pool as usize;
        match &self.per_pool[pool] {
            Ok(ids) => !ids.is_empty() || self.invalid_declarations[pool],
            Err(_) => true,
        }
    }

    /// The extractors that apply to a device: selector matches (or none). A selector error or two
    /// applicable extractors declaring the same key make the device not viable (the error).
    pub fn applicable(&self, index: &Index, cel: &CelCache, dev: DevIdx) -> Result<&[ExtId], String> {
        self.applicable_set(index, cel, dev).map(|(_, ids)| ids)
    }

    /// [`Extractors::applicable`] with the set's interned id. The id names the sequence of the
    /// applicable extractors' groups ([`Extractors::group`]): what a request wants on a device
    /// depends only on the outcomes of those groups, so devices share the id when the same
    /// groups apply, also across pools whose extractors are equal but distinct (one metadata
    /// slice per pool), and per-cycle caches of what a request wants key on it.
    pub fn applicable_set(
        &self,
        index: &Index,
        cel: &CelCache,
        dev: DevIdx,
    ) -> Result<(u32, &[ExtId]), String> {
        self.applicable[dev as usize]
            .get_or_init(|| {
                let ids = self.compute_applicable(index, cel, dev)?;
                let mut sets = self.sets.borrow_mut();
                let next = u32::try_from(sets.len()).unwrap_or(u32::MAX);
                let groups = ids.iter().map(|&id| self.group[id]).collect();
                let id = *sets.entry(groups).or_insert(next);
                Ok((id, ids))
            })
            .as_ref()
            .map(|(id, ids)| (*id, ids.as_slice()))
            .map_err(Clone::clone)
    }

    /// [`Extractors::applicable_set`] in brief: whether no extractor applies, or the set's id. A
    /// device whose set is invalid (or whose id is past the codes) answers [`SetOf::Other`]: ask
    /// [`Extractors::applicable_set`].
    pub fn set_of(&self, index: &Index, cel: &CelCache, dev: DevIdx) -> SetOf {
        let Some(code) = self.set_codes.get(dev as usize) else {
            return SetOf::Other;
        };
        let code = *code.get_or_init(|| match self.applicable_set(index, cel, dev) {
            Ok((_, [])) => SetOf::EMPTY,
            Ok((id, _)) if id < SetOf::OTHER => id,
            _ => SetOf::OTHER,
        });
        match code {
            SetOf::EMPTY => SetOf::Empty,
            SetOf::OTHER => SetOf::Other,
            id => SetOf::Set(id),
        }
    }

    fn compute_applicable(&self, index: &Index, cel: &CelCache, dev: DevIdx) -> Result<Vec<ExtId>, String> {
        let entry = index.device(dev);
        let pool = &index.pools[entry.pool];
        let ids = self.per_pool[entry.pool].as_ref().map_err(Clone::clone)?;
        let declared = declared_keys(&pool.driver, &entry.device)?;
        let mut out = Vec::new();
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        let mut cel_applies = None;
        // Built once for the extractors with selectors, when one has.
        let mut dev_cel = None;
        for &id in ids {
            let ex = &self.list[id];
            if let Some(sk) = &ex.structured {
                if !declared.contains(&sk.name) {
                    continue;
                }
            } else if let Some(expr) = &ex.selector {
                let sel = cel
                    .selector(expr)
                    .map_err(|e| format!("{}: selector {expr:?}: {e}", ex.source))?;
                let dev_cel = match &dev_cel {
                    Some(d) => d,
                    None => dev_cel.insert(entry.cel(&pool.driver)?),
                };
                let m = sel
                    .matches(dev_cel)
                    .map_err(|e| format!("{}: selector {expr:?}: {e}", ex.source))?;
                if !m {
                    continue;
                }
            }
            for key in ex.keys.keys() {
                if let Some(other) = seen.insert(key, &ex.source) {
                    return Err(format!("key {key} declared by both {other} and {}", ex.source));
                }
            }
            if ex.structured.is_none() {
                cel_applies.get_or_insert(&ex.source);
            }
            out.push(id);
        }
        if let Some(source) = cel_applies
            && !declared.is_empty()
        {
            return Err(format!(
                "device {} declares sharingAffinity.attributeKeys and {source} applies to it: \
                 a device declares affinity one way only (CEL extractors or structured keys)",
                entry.device.name
            ));
        }
        Ok(out)
    }
}

/// A fingerprint of the content (selector and key expressions) of the extractors `ids`: cached
/// lock values are valid only while it stays the same. Deterministic within a process.
pub fn fingerprint(extractors: &Extractors, ids: &[ExtId]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for &id in ids {
        let ex = &extractors.list[id];
        ex.selector.hash(&mut h);
        ex.keys.hash(&mut h);
    }
    h.finish()
}

/// The distinct key sets of an [`Extractors::build`], each kept once: every pool of a driver
/// usually has the same extractors, and an [`Extractor`] per pool would otherwise copy its keys
/// and expressions.
#[derive(Default)]
struct KeySets(crate::hashing::FxHashSet<Arc<Map<String, String>>>);

impl KeySets {
    /// The shared copy of `keys`.
    fn get(&mut self, keys: &Map<String, String>) -> Arc<Map<String, String>> {
        if let Some(shared) = self.0.get(keys) {
            return Arc::clone(shared);
        }
        let shared = Arc::new(keys.clone());
        self.0.insert(Arc::clone(&shared));
        shared
    }
}

/// What one extractor yields for one request of a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every key has a value.
    Satisfied(Values),
    /// Some key has no value (the first missing key).
    Missing(String),
    /// Extraction failed.
    Failed(String),
}

/// One config object of a claim, as extractors read it.
pub enum ConfigObject {
    /// `opaque.parameters`, read by CEL extractors (or why they could not be read).
    Opaque(Result<CelObject, String>),
    /// `structured`, read by the implicit structured extractors.
    Structured {
        /// `structured.driver`.
        driver: String,
        /// Attributes by fully qualified name (names without a domain get the driver's).
        attributes: Map<String, DeviceAttribute>,
    },
}

/// Runs an extractor over the claim's config objects in scope for `request`/`sub`: CEL
/// extractors over the opaque objects, structured extractors over the structured configs of
/// their driver.
///
/// Returns `Err` (the claim is self-inconsistent: `UnschedulableAndUnresolvable`) when two
/// objects give one key different values.
pub fn extract(
    cel: &CelCache,
    ex: &Extractor,
    objects: &[(RequestScope, ConfigObject)],
    request: &str,
    sub: Option<&str>,
    claim: &str,
) -> Result<Outcome, String> {
    let mut values = Values::new();
    let mut failure = None;
    let put = |key: &str, v: String, values: &mut Values| -> Result<(), String> {
        match values.get(key) {
            Some(prev) if *prev != v => Err(format!(
                "claim {claim}: request {}: config objects give affinity key {key} two values, {prev:?} and {v:?}",
                full_name(request, sub)
            )),
            _ => {
                values.insert(key.to_string(), v);
                Ok(())
            }
        }
    };
    if let Some(sk) = &ex.structured {
        for (scope, object) in objects {
            let ConfigObject::Structured { driver, attributes } = object else {
                continue;
            };
            if !scope.covers(request, sub) || *driver != sk.driver {
                continue;
            }
            let Some(attr) = attributes.get(&sk.name) else {
                continue;
            };
            match structured_string(attr) {
                Ok("") => {}
                Ok(v) => put(&sk.name, v.to_string(), &mut values)?,
                Err(kind) => {
                    failure.get_or_insert(format!(
                        "{}: key {}: structured attribute is {kind}, only string values are supported",
                        ex.source, sk.name
                    ));
                }
            }
        }
    } else {
        for (key, expr) in ex.keys.iter() {
            let program = match cel.extractor(expr) {
                Ok(p) => p,
                Err(e) => {
                    failure.get_or_insert(format!("{}: key {key}: {e}", ex.source));
                    continue;
                }
            };
            for (scope, object) in objects {
                let ConfigObject::Opaque(object) = object else {
                    continue;
                };
                if !scope.covers(request, sub) {
                    continue;
                }
                let object = match object {
                    Ok(o) => o,
                    Err(e) => {
                        failure.get_or_insert(format!("{}: key {key}: {e}", ex.source));
                        continue;
                    }
                };
                match program.extract(object) {
                    Ok(v) if v.is_empty() => {}
                    Ok(v) => put(key, v, &mut values)?,
                    Err(e) => {
                        failure.get_or_insert(format!("{}: key {key}: {e}", ex.source));
                    }
                }
            }
        }
    }
    if let Some(f) = failure {
        return Ok(Outcome::Failed(f));
    }
    if let Some(missing) = ex.keys.keys().find(|k| !values.contains_key(*k)) {
        return Ok(Outcome::Missing(missing.clone()));
    }
    Ok(Outcome::Satisfied(values))
}

/// The string of a structured attribute, or the kind of value it holds instead.
fn structured_string(attr: &DeviceAttribute) -> Result<&str, &'static str> {
    use crate::model::AttributeValue as V;
    match attr {
        DeviceAttribute::Valid(V::String(s)) => Ok(s),
        DeviceAttribute::Valid(V::Int(_)) => Err("an int"),
        DeviceAttribute::Valid(V::Bool(_)) => Err("a bool"),
        DeviceAttribute::Valid(V::Version(_)) => Err("a version"),
        DeviceAttribute::Valid(_) => Err("a list"),
        DeviceAttribute::Invalid(f) if *f.as_ref() == Default::default() => Err("empty (no value set)"),
        DeviceAttribute::Invalid(_) => Err("several values"),
    }
}

/// `req` or `req/sub`.
pub fn full_name(request: &str, sub: Option<&str>) -> String {
    FullName(request, sub).to_string()
}

/// A request's full name (`request` or `request/subrequest`) as `Display`: formatted only where
/// it is written (error messages on hot paths).
pub struct FullName<'x>(pub &'x str, pub Option<&'x str>);

impl std::fmt::Display for FullName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            Some(sub) => write!(f, "{}/{sub}", self.0),
            None => f.write_str(self.0),
        }
    }
}

/// The config objects of a claim with their request scopes: opaque parameters prepared for CEL,
/// and structured attributes with fully qualified names.
pub fn claim_objects(claim: &ResourceClaim) -> Vec<(RequestScope, ConfigObject)> {
    let mut out = Vec::new();
    for c in &claim.spec.devices.config {
        if let Some(o) = &c.opaque {
            out.push((
                RequestScope::new(&c.requests),
                ConfigObject::Opaque(CelObject::from_parameters(&o.parameters)),
            ));
        }
        if let Some(st) = &c.structured {
            out.push((
                RequestScope::new(&c.requests),
                ConfigObject::Structured {
                    driver: st.driver.clone(),
                    attributes: st
                        .attributes
                        .iter()
                        .map(|(k, v)| (qualify(&st.driver, k), v.clone()))
                        .collect(),
                },
            ));
        }
    }
    out
}

/// Combines the outcomes of the applicable extractors for a request: the values the request
/// wants on this device, or why the device is not viable.
pub fn wanted(outcomes: &[&Outcome]) -> Result<Values, Rejection> {
    let mut all = Values::new();
    for o in outcomes {
        match o {
            Outcome::Satisfied(v) => all.extend(v.iter().map(|(k, v)| (k.clone(), v.clone()))),
            Outcome::Missing(k) => return Err(Rejection::MissingKey(k.clone())),
            Outcome::Failed(e) => return Err(Rejection::Extraction(e.clone())),
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affinity::test_values as vals;

    /// Devices share an applicable-set id exactly when the same extractor groups apply: two
    /// pools with equal extractors (distinct entries, one per pool) share it, a pool whose
    /// extractor declares another key does not, and a device no extractor applies to has none.
    #[test]
    fn applicable_set_ids_name_extractor_groups_across_pools() {
        let slice = |pool: &str| {
            format!(
                r#"{{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{{"name":"{pool}"}},
                "spec":{{"driver":"d","nodeName":"n-{pool}","pool":{{"name":"{pool}","generation":1,"resourceSliceCount":1}},
                "devices":[{{"name":"x","allowMultipleAllocations":true}},{{"name":"y","allowMultipleAllocations":true}}]}}}}"#
            )
        };
        let json = ["p", "q", "r", "s"].map(slice).join("\n");
        let slices: Vec<crate::model::ResourceSlice> = crate::object::parse_objects(&json)
            .unwrap()
            .objects
            .into_iter()
            .filter_map(|o| match o {
                crate::object::Object::ResourceSlice(s) => Some(*s),
                _ => None,
            })
            .collect();
        let index = Index::build(&slices);
        let config = Config::from_json(
            r#"{"sharingAffinity":[
                {"driver":"d","pool":"p","cel":{"subnet":"object.subnet"}},
                {"driver":"d","pool":"q","cel":{"subnet":"object.subnet"}},
                {"driver":"d","pool":"r","cel":{"pkey":"object.pkey"}}]}"#,
        )
        .unwrap();
        let cel = CelCache::new();
        let ex = Extractors::build(&index, &config, &cel);
        let set = |pool: &str, device: &str| {
            let d = index.by_key[&crate::index::DeviceKey::new("d", pool, device)];
            ex.applicable_set(&index, &cel, d)
                .map(|(id, ids)| (id, ids.to_vec()))
                .unwrap()
        };
        let (p, q, r) = (set("p", "x"), set("q", "y"), set("r", "x"));
        assert_ne!(p.1, q.1, "one extractor entry per pool");
        assert_eq!(p.0, q.0, "equal extractors: one set id");
        assert_eq!(p.0, set("p", "y").0);
        assert_ne!(p.0, r.0, "another key: another set id");
        assert!(set("s", "x").1.is_empty(), "pool s has no extractor");
        // Pools' entries with the same keys and expressions hold one copy of them.
        let keys = |id: ExtId| &ex.list[id].keys;
        assert!(Arc::ptr_eq(keys(p.1[0]), keys(q.1[0])), "equal keys: one copy");
        assert!(!Arc::ptr_eq(keys(p.1[0]), keys(r.1[0])), "another key");
        // The compact answer agrees with the full one.
        let brief = |pool: &str, device: &str| {
            let d = index.by_key[&crate::index::DeviceKey::new("d", pool, device)];
            ex.set_of(&index, &cel, d)
        };
        assert_eq!(brief("p", "x"), SetOf::Set(p.0));
        assert_eq!(brief("q", "y"), SetOf::Set(q.0));
        assert_eq!(brief("r", "x"), SetOf::Set(r.0));
        assert_eq!(brief("s", "x"), SetOf::Empty);
    }

    /// Equal value sets share one allocation while the table has room; past its limit, equal
    /// sets that were not interned still compare equal, and different sets never do.
    #[test]
    fn interned_values_compare_by_pointer_and_by_content_past_the_limit() {
        let ex = Extractors::build(&Index::default(), &Config::default(), &CelCache::new());
        let subnet = |v: String| Arc::new(Values::from([("subnet".to_string(), v)]));
        let a = ex.intern(subnet("a".into()));
        let a2 = ex.intern(subnet("a".into()));
        assert!(Arc::ptr_eq(&a, &a2), "equal contents: one allocation");
        assert!(ex.same(&a, &a2));
        assert!(!ex.same(&a, &ex.intern(subnet("b".into()))));
        for i in 0..Extractors::MAX_INTERNED {
            ex.intern(subnet(format!("fill-{i}")));
        }
        let late = ex.intern(subnet("late".into()));
        let late2 = ex.intern(subnet("late".into()));
        assert!(
            !Arc::ptr_eq(&late, &late2),
            "past the limit nothing new is interned"
        );
        assert!(ex.same(&late, &late2), "equal contents stay equal");
        assert!(!ex.same(&late, &a), "different contents stay different");
        assert!(
            ex.same(&a, &ex.intern(subnet("a".into()))),
            "interned before the limit"
        );
    }

    #[test]
    fn wanted_is_strict() {
        let s = Outcome::Satisfied(vals(&[("subnet", "A")]));
        let p = Outcome::Satisfied(vals(&[("pkey", "1")]));
        assert_eq!(
            wanted(&[&s, &p]).unwrap(),
            vals(&[("pkey", "1"), ("subnet", "A")]),
            "union of groups"
        );
        assert_eq!(
            wanted(&[&s, &Outcome::Missing("pkey".into())]),
            Err(Rejection::MissingKey("pkey".into()))
        );
        assert!(matches!(
            wanted(&[&Outcome::Failed("x".into())]),
            Err(Rejection::Extraction(_))
        ));
        assert_eq!(
            wanted(&[]).unwrap(),
            Values::new(),
            "no applicable extractor: no lock values"
        );
    }
}
