//! An independent auditor of allocation outcomes.
//!
//! Given a cluster (ResourceSlices, DeviceClasses, ResourceClaims with `status.allocation`) and the
//! plugin configuration, [`audit`] checks that the allocations recorded in the claims obey the DRA
//! and sharing-affinity rules. It never runs the allocator's search and shares none of its code:
//! it uses only the API model, quantities and CEL of this crate, and re-derives every rule from
//! the recorded outcome. Whatever produced the allocations (this plugin, another scheduler, or a
//! racy placeholder workaround), a violation names the device, the claims and the [`Rule`].
//!
//! Sharing affinity is checked for both declarations: CEL extractors (metadata slices or the
//! configuration) over opaque configs, and the seed's structured design (a device's
//! `sharingAffinity.attributeKeys` over the claims' `structured` attributes); a device declaring
//! both breaks gating.
//!
//! Results with `adminAccess: true` are checked against selectors and constraints but, as
//! upstream's allocated-device accounting does, never count as holders of a device.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::cel::{CelCache, CelDevice, CelObject};
use crate::config::Config;
use crate::model::{
    AttributeValue, CapacityRequestPolicy, CapacityRequirements, Device, DeviceAllocationResult, DeviceClass,
    DeviceRequestAllocationResult, DeviceSelector, Map, ResourceClaim, ResourceSlice,
};
use crate::object::{Object, object_key};
use crate::quantity::Quantity;

/// The rule a violation breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// A result names a device, request or class that does not exist.
    UnknownReference,
    /// The sum of `consumedCapacity` exceeds a capacity, or a share consumes less than requested
    /// or names a capacity the device does not have.
    Capacity,
    /// A share's `consumedCapacity` is not allowed by the capacity's `requestPolicy`.
    RequestPolicy,
    /// A dedicated device is allocated more than once, or a device that does not allow multiple
    /// allocations carries a shared allocation.
    Dedicated,
    /// The devices allocated from a pool consume more of a counter than its counter set holds.
    Counters,
    /// A device does not satisfy its class's or request's selectors.
    Selector,
    /// The devices of a claim break its `matchAttribute` or `distinctAttribute` constraint.
    Constraint,
    /// A multi-allocatable device is held by claims whose affinity values differ.
    Lock,
    /// A device is held by a claim whose affinity extraction fails or misses a key.
    Gating,
}

impl Rule {
    /// The rule's name as printed (`capacity`, `lock`...).
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::UnknownReference => "unknown-reference",
            Rule::Capacity => "capacity",
            Rule::RequestPolicy => "request-policy",
            Rule::Dedicated => "dedicated",
            Rule::Counters => "counters",
            Rule::Selector => "selector",
            Rule::Constraint => "constraint",
            Rule::Lock => "lock",
            Rule::Gating => "gating",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// `driver/pool/device` (for counters: `driver/pool` and the counter set).
    pub device: String,
    /// The claims involved (`namespace/name`), sorted.
    pub claims: Vec<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: device {}: claims {}: {}",
            self.rule,
            self.device,
            self.claims.join(", "),
            self.message
        )
    }
}

/// A pool at its highest generation.
struct AuditPool<'a> {
    driver: &'a str,
    name: &'a str,
    complete: bool,
    devices: BTreeMap<&'a str, &'a Device>,
    counter_sets: BTreeMap<&'a str, BTreeMap<&'a str, &'a Quantity>>,
    /// Extractors as (source, selector, key → expression).
    extractors: Vec<(String, Option<&'a DeviceSelector>, &'a Map<String, String>)>,
}

/// One allocation result and where it comes from.
struct Holding<'a> {
    claim: &'a ResourceClaim,
    key: String,
    result: &'a DeviceRequestAllocationResult,
}

impl Holding<'_> {
    fn counts(&self) -> bool {
        self.result.admin_access != Some(true)
    }
}

/// Audits the allocations of `objects` under `config` (the plugin configuration, for extractors
/// configured instead of published). Returns the violations, sorted; empty when all is well.
pub fn audit(objects: &[Object], config: &Config) -> Vec<Violation> {
    audit_with(objects, config, &CelCache::new())
}

/// [`audit`] with a CEL cache that outlives the call (to audit many states of one cluster).
pub fn audit_with(objects: &[Object], config: &Config, cel: &CelCache) -> Vec<Violation> {
    Auditor::new(objects, config, cel).run()
}

struct Auditor<'a> {
    pools: BTreeMap<(&'a str, &'a str), AuditPool<'a>>,
    classes: BTreeMap<&'a str, &'a DeviceClass>,
    claims: Vec<(String, &'a ResourceClaim, &'a DeviceAllocationResult)>,
    cel: &'a CelCache,
    out: Vec<Violation>,
}

impl<'a> Auditor<'a> {
    fn new(objects: &'a [Object], config: &'a Config, cel: &'a CelCache) -> Self {
        let mut slices: BTreeMap<(&str, &str), Vec<&ResourceSlice>> = BTreeMap::new();
        let mut classes = BTreeMap::new();
        let mut claims = Vec::new();
        for object in objects {
            match object {
                Object::ResourceSlice(s) => slices
                    .entry((s.spec.driver.as_str(), s.spec.pool.name.as_str()))
                    .or_default()
                    .push(s),
                Object::DeviceClass(c) => {
                    classes.insert(c.metadata.name.as_str(), &**c);
                }
                Object::ResourceClaim(c) => {
                    if let Some(a) = &c.status.allocation {
                        claims.push((object.key(), &**c, &a.devices));
                    }
                }
                _ => {}
            }
        }
        let pools = slices
            .into_iter()
            .map(|(id, all)| (id, build_pool(id, &all, config)))
            .collect();
        Auditor {
            pools,
            classes,
            claims,
            cel,
            out: Vec::new(),
        }
    }

    fn report(
        &mut self,
        rule: Rule,
        device: String,
        claims: impl IntoIterator<Item = String>,
        message: String,
    ) {
        let claims: BTreeSet<String> = claims.into_iter().collect();
        self.out.push(Violation {
            rule,
            device,
            claims: claims.into_iter().collect(),
            message,
        });
    }

    fn run(mut self) -> Vec<Violation> {
        let claims = std::mem::take(&mut self.claims);
        // Holdings per device, in claim order.
        let mut by_device: BTreeMap<(&str, &str, &str), Vec<Holding<'a>>> = BTreeMap::new();
        for (key, claim, devices) in &claims {
            for result in &devices.results {
                let id = (
                    result.driver.as_str(),
                    result.pool.as_str(),
                    result.device.as_str(),
                );
                let holding = Holding {
                    claim,
                    key: key.clone(),
                    result,
                };
                if self.check_result(&holding) {
                    by_device.entry(id).or_default().push(holding);
                }
            }
            self.check_constraints(key, claim, devices);
        }
        for (&(driver, pool, name), holdings) in &by_device {
            let Some(device) = self
                .pools
                .get(&(driver, pool))
                .and_then(|p| p.devices.get(name))
                .copied()
            else {
                continue;
            };
            let id = format!("{driver}/{pool}/{name}");
            let counted: Vec<&Holding> = holdings.iter().filter(|h| h.counts()).collect();
            self.check_dedicated(&id, device, &counted);
            self.check_capacity(&id, device, &counted);
            self.check_affinity(&id, (driver, pool), device, &counted);
        }
        self.check_counters(&by_device);
        self.out.sort();
        self.out.dedup();
        self.out
    }

    /// Checks one result against its device, request and class. Returns whether the device exists
    /// (only then is it checked further).
    fn check_result(&mut self, h: &Holding<'_>) -> bool {
        let r = h.result;
        let id = format!("{}/{}/{}", r.driver, r.pool, r.device);
        let Some(pool) = self.pools.get(&(r.driver.as_str(), r.pool.as_str())) else {
            self.report(
                Rule::UnknownReference,
                id,
                [h.key.clone()],
                format!(
                    "request {}: no ResourceSlice publishes pool {}/{}",
                    r.request, r.driver, r.pool
                ),
            );
            return false;
        };
        let Some(device) = pool.devices.get(r.device.as_str()).copied() else {
            self.report(
                Rule::UnknownReference,
                id,
                [h.key.clone()],
                format!(
                    "request {}: the pool's current generation has no such device",
                    r.request
                ),
            );
            return false;
        };
        let Some(request) = find_request(h.claim, &r.request) else {
            self.report(
                Rule::UnknownReference,
                id,
                [h.key.clone()],
                format!(
                    "result names request {}, which the claim does not have",
                    r.request
                ),
            );
            return true;
        };
        let mut selectors: Vec<(String, &str)> = Vec::new();
        match self.classes.get(request.class).copied() {
            Some(class) => {
                for (i, s) in class.spec.selectors.iter().enumerate() {
                    selectors.push((
                        format!("DeviceClass {} spec.selectors[{i}]", request.class),
                        &s.cel.expression,
                    ));
                }
            }
            None => self.report(
                Rule::UnknownReference,
                id.clone(),
                [h.key.clone()],
                format!(
                    "request {}: DeviceClass {} does not exist",
                    r.request, request.class
                ),
            ),
        }
        for (i, s) in request.selectors.iter().enumerate() {
            selectors.push((format!("request {} selectors[{i}]", r.request), &s.cel.expression));
        }
        if !selectors.is_empty() {
            let cel_device = cel_device(&r.driver, device);
            for (source, expr) in selectors {
                let verdict = match &cel_device {
                    Err(e) => Err(e.clone()),
                    Ok(d) => self
                        .cel
                        .selector(expr)
                        .and_then(|s| s.matches(d))
                        .map_err(|e| e.to_string()),
                };
                match verdict {
                    Ok(true) => {}
                    Ok(false) => self.report(
                        Rule::Selector,
                        id.clone(),
                        [h.key.clone()],
                        format!("{source}: {expr:?} is false for the device"),
                    ),
                    Err(e) => self.report(
                        Rule::Selector,
                        id.clone(),
                        [h.key.clone()],
                        format!("{source}: {expr:?} cannot be evaluated: {e}"),
                    ),
                }
            }
        }
        if h.counts() {
            self.check_requested_capacity(&id, h, device, request.capacity);
        }
        true
    }

    /// A share must consume at least what its request asks for, of capacities the device has; a
    /// dedicated allocation needs each requested amount to fit in the device.
    fn check_requested_capacity(
        &mut self,
        id: &str,
        h: &Holding<'_>,
        device: &Device,
        requested: Option<&CapacityRequirements>,
    ) {
        let r = h.result;
        if r.share_id.is_some() {
            for (name, consumed) in r.consumed_capacity.iter().flatten() {
                let Some(cap) = device.capacity.get(name) else {
                    self.report(
                        Rule::Capacity,
                        id.to_string(),
                        [h.key.clone()],
                        format!(
                            "request {}: consumedCapacity names {name}, which the device does not have",
                            r.request
                        ),
                    );
                    continue;
                };
                if let Some(why) = policy_violation(consumed, cap.request_policy.as_deref()) {
                    self.report(
                        Rule::RequestPolicy,
                        id.to_string(),
                        [h.key.clone()],
                        format!("request {}: consumedCapacity {name} {consumed}: {why}", r.request),
                    );
                }
            }
        }
        for (name, want) in requested.map(|c| &c.requests).into_iter().flatten() {
            let Some(cap) = device.capacity.get(name) else {
                self.report(
                    Rule::Capacity,
                    id.to_string(),
                    [h.key.clone()],
                    format!(
                        "request {} asks for capacity {name}, which the device does not have",
                        r.request
                    ),
                );
                continue;
            };
            if r.share_id.is_some() {
                let got = r.consumed_capacity.as_ref().and_then(|c| c.get(name));
                if got.is_none_or(|g| g < want) {
                    let got = got.map_or_else(|| "nothing".to_string(), ToString::to_string);
                    self.report(
                        Rule::Capacity,
                        id.to_string(),
                        [h.key.clone()],
                        format!(
                            "request {} asks for {name} {want} but its share consumes {got}",
                            r.request
                        ),
                    );
                }
            } else if want > &cap.value {
                self.report(
                    Rule::Capacity,
                    id.to_string(),
                    [h.key.clone()],
                    format!(
                        "request {} asks for {name} {want}, more than the device's {}",
                        r.request, cap.value
                    ),
                );
            }
        }
    }

    fn check_dedicated(&mut self, id: &str, device: &Device, counted: &[&Holding<'_>]) {
        let multi = device.allow_multiple_allocations == Some(true);
        if !multi {
            let shared: Vec<String> = counted
                .iter()
                .filter(|h| h.result.share_id.is_some())
                .map(|h| h.key.clone())
                .collect();
            if !shared.is_empty() {
                self.report(
                    Rule::Dedicated,
                    id.to_string(),
                    shared,
                    "shared allocation (shareID) of a device that does not allow multiple allocations".into(),
                );
            }
        }
        let dedicated = counted.iter().any(|h| h.result.share_id.is_none());
        if counted.len() > 1 && (dedicated || !multi) {
            self.report(
                Rule::Dedicated,
                id.to_string(),
                counted.iter().map(|h| h.key.clone()),
                format!(
                    "allocated {} times, but {}",
                    counted.len(),
                    if multi {
                        "one allocation is dedicated (no shareID)"
                    } else {
                        "the device does not allow multiple allocations"
                    }
                ),
            );
        }
    }

    fn check_capacity(&mut self, id: &str, device: &Device, counted: &[&Holding<'_>]) {
        let mut sums: BTreeMap<&str, Quantity> = BTreeMap::new();
        let mut holders: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for h in counted.iter().filter(|h| h.result.share_id.is_some()) {
            for (name, q) in h.result.consumed_capacity.iter().flatten() {
                let sum = sums.entry(name).or_insert_with(|| Quantity::from_i64(0));
                match sum.checked_add(q) {
                    Some(s) => *sum = s,
                    None => {
                        *sum = Quantity::from_nanos(i128::MAX, sum.format());
                    }
                }
                holders.entry(name).or_default().push(h.key.clone());
            }
        }
        for (name, sum) in sums {
            let Some(cap) = device.capacity.get(name) else {
                continue;
            };
            if sum > cap.value {
                self.report(
                    Rule::Capacity,
                    id.to_string(),
                    holders.remove(name).unwrap_or_default(),
                    format!(
                        "consumedCapacity {name} sums to {sum}, more than the capacity {}",
                        cap.value
                    ),
                );
            }
        }
    }

    fn check_counters(&mut self, by_device: &BTreeMap<(&str, &str, &str), Vec<Holding<'_>>>) {
        // (driver, pool, set, counter) → (sum, claims)
        let mut sums: BTreeMap<CounterId<'_>, (Quantity, BTreeSet<String>)> = BTreeMap::new();
        let mut bad = Vec::new();
        for (&(driver, pool_name, name), holdings) in by_device {
            let counted: Vec<&Holding> = holdings.iter().filter(|h| h.counts()).collect();
            let Some(pool) = self.pools.get(&(driver, pool_name)) else {
                continue;
            };
            let Some(device) = pool.devices.get(name) else {
                continue;
            };
            if counted.is_empty() {
                continue;
            }
            // A device consumes its counters once, however many shares it has (KEP-5075).
            for consumption in &device.consumes_counters {
                for (counter, amount) in &consumption.counters {
                    let known = pool
                        .counter_sets
                        .get(consumption.counter_set.as_str())
                        .is_some_and(|s| s.contains_key(counter.as_str()));
                    if !known {
                        bad.push((
                            format!("{driver}/{pool_name}/{name}"),
                            counted.iter().map(|h| h.key.clone()).collect::<Vec<_>>(),
                            format!(
                                "consumes counter {counter} of counter set {}, which the pool does not define",
                                consumption.counter_set
                            ),
                        ));
                        continue;
                    }
                    let entry = sums
                        .entry((
                            driver,
                            pool_name,
                            consumption.counter_set.as_str(),
                            counter.as_str(),
                        ))
                        .or_insert_with(|| (Quantity::from_i64(0), BTreeSet::new()));
                    entry.0 = entry
                        .0
                        .checked_add(&amount.value)
                        .unwrap_or_else(|| Quantity::from_nanos(i128::MAX, entry.0.format()));
                    entry.1.extend(counted.iter().map(|h| h.key.clone()));
                }
            }
        }
        for (device, claims, message) in bad {
            self.report(Rule::Counters, device, claims, message);
        }
        for ((driver, pool_name, set, counter), (sum, claims)) in sums {
            let Some(limit) = self.pools[&(driver, pool_name)].counter_sets[set]
                .get(counter)
                .copied()
            else {
                continue;
            };
            if sum > *limit {
                self.report(
                    Rule::Counters,
                    format!("{driver}/{pool_name} counter set {set}"),
                    claims,
                    format!("allocated devices consume {sum} of counter {counter}, more than its {limit}"),
                );
            }
        }
    }

    fn check_constraints(&mut self, key: &str, claim: &ResourceClaim, devices: &DeviceAllocationResult) {
        for (i, c) in claim.spec.devices.constraints.iter().enumerate() {
            let (attribute, distinct) = match (&c.match_attribute, &c.distinct_attribute) {
                (Some(a), None) => (a, false),
                (None, Some(a)) => (a, true),
                _ => continue,
            };
            let field = format!(
                "spec.devices.constraints[{i}].{}",
                if distinct {
                    "distinctAttribute"
                } else {
                    "matchAttribute"
                }
            );
            let mut seen: Vec<(String, AttributeValue)> = Vec::new();
            for r in &devices.results {
                if !in_scope(&c.requests, &r.request) {
                    continue;
                }
                let id = format!("{}/{}/{}", r.driver, r.pool, r.device);
                let Some(device) = self
                    .pools
                    .get(&(r.driver.as_str(), r.pool.as_str()))
                    .and_then(|p| p.devices.get(r.device.as_str()))
                    .copied()
                else {
                    continue; // reported as an unknown reference
                };
                let Some(value) = lookup_attribute(device, &r.driver, attribute) else {
                    self.report(
                        Rule::Constraint,
                        id,
                        [key.to_string()],
                        format!(
                            "{field} {attribute}: request {}: the device has no single value for it",
                            r.request
                        ),
                    );
                    continue;
                };
                for (other, v) in &seen {
                    let clash = if distinct { *v == value } else { *v != value };
                    if clash {
                        self.report(
                            Rule::Constraint,
                            id.clone(),
                            [key.to_string()],
                            format!(
                                "{field} {attribute}: {} has {}, device {other} has {}",
                                r.request,
                                show_attr(&value),
                                show_attr(v)
                            ),
                        );
                        break;
                    }
                }
                seen.push((id, value));
            }
        }
    }

    /// Strict gating and the lock invariant for a multi-allocatable device of an affinity pool.
    fn check_affinity(&mut self, id: &str, pool_id: (&str, &str), device: &Device, counted: &[&Holding<'_>]) {
        if device.allow_multiple_allocations != Some(true) || counted.is_empty() {
            return;
        }
        let pool = &self.pools[&pool_id];
        let driver = pool.driver;
        let extractors = pool.extractors.clone();
        // The seed's structured design: keys the device declares, qualified with the driver.
        let structured: Vec<String> = device
            .sharing_affinity
            .as_ref()
            .map(|sa| {
                sa.attribute_keys
                    .iter()
                    .map(|k| {
                        if k.contains('/') {
                            k.clone()
                        } else {
                            format!("{driver}/{k}")
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        if extractors.is_empty() && structured.is_empty() {
            return;
        }
        let holders = || counted.iter().map(|h| h.key.clone());
        if extractors.len() > MAX_EXTRACTORS {
            let message = format!(
                "pool has {} sharing-affinity extractors, at most {MAX_EXTRACTORS} allowed: no device of it may be shared",
                extractors.len()
            );
            self.report(Rule::Gating, id.to_string(), holders(), message);
            return;
        }
        // The extractors that apply to the device.
        let mut applicable = Vec::new();
        let mut declared: BTreeMap<&str, &str> = BTreeMap::new();
        let cel_dev = cel_device(driver, device);
        let mut setup_error = None;
        for (source, selector, keys) in &extractors {
            if let Some(sel) = selector {
                let expr = &sel.cel.expression;
                let m = match &cel_dev {
                    Err(e) => Err(e.clone()),
                    Ok(d) => self
                        .cel
                        .selector(expr)
                        .and_then(|s| s.matches(d))
                        .map_err(|e| e.to_string()),
                };
                match m {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        setup_error.get_or_insert(format!("{source}: selector {expr:?}: {e}"));
                        continue;
                    }
                }
            }
            for k in keys.keys() {
                if let Some(other) = declared.insert(k, source) {
                    setup_error
                        .get_or_insert(format!("affinity key {k} declared by both {other} and {source}"));
                }
            }
            applicable.push((source.as_str(), *keys));
        }
        if let (Some((source, _)), false) = (applicable.first(), structured.is_empty()) {
            setup_error.get_or_insert(format!(
                "the device declares sharingAffinity.attributeKeys and {source} applies to it: affinity is declared one way only"
            ));
        }
        if let Some(e) = setup_error {
            self.report(Rule::Gating, id.to_string(), holders(), e);
            return;
        }
        if applicable.is_empty() && structured.is_empty() {
            return;
        }
        let mut values: BTreeMap<BTreeMap<String, String>, Vec<String>> = BTreeMap::new();
        for h in counted {
            let extracted = if structured.is_empty() {
                self.extract(h, &applicable)
            } else {
                extract_structured(h, driver, &structured)
            };
            match extracted {
                Ok(v) => values.entry(v).or_default().push(h.key.clone()),
                Err(e) => self.report(
                    Rule::Gating,
                    id.to_string(),
                    [h.key.clone()],
                    format!("request {}: {e}", h.result.request),
                ),
            }
        }
        if values.len() > 1 {
            let groups: Vec<String> = values
                .iter()
                .map(|(v, claims)| format!("{} ({})", show_values(v), claims.join(", ")))
                .collect();
            self.report(
                Rule::Lock,
                id.to_string(),
                values.into_values().flatten(),
                format!(
                    "held by claims with different affinity values: {}",
                    groups.join(" vs ")
                ),
            );
        }
    }

    /// The affinity values of a holding, from the claim's opaque config in scope for its request.
    fn extract(
        &self,
        h: &Holding<'_>,
        applicable: &[(&str, &Map<String, String>)],
    ) -> Result<BTreeMap<String, String>, String> {
        let objects: Vec<CelObject> = h
            .claim
            .spec
            .devices
            .config
            .iter()
            .filter(|c| in_scope(&c.requests, &h.result.request))
            .filter_map(|c| c.opaque.as_ref())
            .map(|o| CelObject::from_parameters(&o.parameters))
            .collect::<Result<_, String>>()?;
        let mut values = BTreeMap::new();
        for (source, keys) in applicable {
            for (key, expr) in *keys {
                let program = self
                    .cel
                    .extractor(expr)
                    .map_err(|e| format!("{source}: key {key}: {e}"))?;
                let mut found: Option<String> = None;
                for object in &objects {
                    let v = program
                        .extract(object)
                        .map_err(|e| format!("{source}: key {key}: extraction failed: {e}"))?;
                    if v.is_empty() {
                        continue;
                    }
                    match &found {
                        Some(prev) if *prev != v => {
                            return Err(format!(
                                "config objects give affinity key {key} two values, {prev:?} and {v:?}"
                            ));
                        }
                        _ => found = Some(v),
                    }
                }
                match found {
                    Some(v) => {
                        values.insert(key.clone(), v);
                    }
                    None => {
                        return Err(format!(
                            "{source}: the claim gives no value for affinity key {key}"
                        ));
                    }
                }
            }
        }
        Ok(values)
    }
}

/// The structured-design affinity values of a holding: per declared key, the string attribute of
/// the claim's `structured` configs for `driver` in scope for its request.
fn extract_structured(
    h: &Holding<'_>,
    driver: &str,
    keys: &[String],
) -> Result<BTreeMap<String, String>, String> {
    let mut values = BTreeMap::new();
    for key in keys {
        let mut found: Option<&str> = None;
        for c in &h.claim.spec.devices.config {
            let Some(st) = c.structured.as_ref().filter(|st| st.driver == driver) else {
                continue;
            };
            if !in_scope(&c.requests, &h.result.request) {
                continue;
            }
            for (name, attr) in &st.attributes {
                let qualified = if name.contains('/') {
                    name.clone()
                } else {
                    format!("{}/{name}", st.driver)
                };
                if qualified != *key {
                    continue;
                }
                let v = match attr.as_value() {
                    Some(crate::model::AttributeValue::String(v)) => v.as_str(),
                    _ => return Err(format!("structured attribute {key} is not a string")),
                };
                if v.is_empty() {
                    continue;
                }
                match found {
                    Some(prev) if prev != v => {
                        return Err(format!(
                            "structured configs give affinity key {key} two values, {prev:?} and {v:?}"
                        ));
                    }
                    _ => found = Some(v),
                }
            }
        }
        match found {
            Some(v) => {
                values.insert(key.clone(), v.to_string());
            }
            None => {
                return Err(format!(
                    "the claim gives no structured value for affinity key {key}"
                ));
            }
        }
    }
    Ok(values)
}

/// `(driver, pool, counter set, counter)`.
type CounterId<'a> = (&'a str, &'a str, &'a str, &'a str);

/// KEP-5981 limit on extractors per pool.
const MAX_EXTRACTORS: usize = 8;

fn build_pool<'a>(id: (&'a str, &'a str), slices: &[&'a ResourceSlice], config: &'a Config) -> AuditPool<'a> {
    let generation = slices.iter().map(|s| s.spec.pool.generation).max().unwrap_or(0);
    let current: Vec<&ResourceSlice> = slices
        .iter()
        .copied()
        .filter(|s| s.spec.pool.generation == generation)
        .collect();
    let complete = current
        .iter()
        .all(|s| usize::try_from(s.spec.pool.resource_slice_count).is_ok_and(|n| n == current.len()));
    let mut pool = AuditPool {
        driver: id.0,
        name: id.1,
        complete,
        devices: BTreeMap::new(),
        counter_sets: BTreeMap::new(),
        extractors: Vec::new(),
    };
    for s in &current {
        for d in &s.spec.devices {
            pool.devices.insert(d.name.as_str(), d);
        }
        for set in &s.spec.shared_counters {
            pool.counter_sets.insert(
                set.name.as_str(),
                set.counters.iter().map(|(k, c)| (k.as_str(), &c.value)).collect(),
            );
        }
        if pool.complete {
            for (i, ex) in s.spec.sharing_affinity.iter().enumerate() {
                pool.extractors.push((
                    format!("ResourceSlice {} spec.sharingAffinity[{i}]", s.metadata.name),
                    ex.selector.as_ref(),
                    &ex.cel,
                ));
            }
        }
    }
    for (i, ex) in config.sharing_affinity.iter().enumerate() {
        if ex.driver == pool.driver && ex.pool.as_deref().is_none_or(|p| p == pool.name) {
            pool.extractors.push((
                format!("configuration sharingAffinity[{i}]"),
                ex.selector.as_ref(),
                &ex.cel,
            ));
        }
    }
    pool
}

/// What a result's request asks for.
struct RequestView<'a> {
    class: &'a str,
    selectors: &'a [DeviceSelector],
    capacity: Option<&'a CapacityRequirements>,
}

/// The request (`req`) or subrequest (`req/sub`) a result names.
fn find_request<'a>(claim: &'a ResourceClaim, name: &str) -> Option<RequestView<'a>> {
    let (req, sub) = match name.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (name, None),
    };
    let request = claim.spec.devices.requests.iter().find(|r| r.name == req)?;
    match sub {
        None => request.exactly.as_ref().map(|e| RequestView {
            class: &e.device_class_name,
            selectors: &e.selectors,
            capacity: e.capacity.as_ref(),
        }),
        Some(sub) => request
            .first_available
            .iter()
            .find(|s| s.name == sub)
            .map(|s| RequestView {
                class: &s.device_class_name,
                selectors: &s.selectors,
                capacity: s.capacity.as_ref(),
            }),
    }
}

/// Whether a `requests` list (of a constraint or a config entry) covers the result's request
/// (`req` or `req/sub`): empty covers everything, `req` covers its subrequests.
fn in_scope(requests: &[String], result_request: &str) -> bool {
    if requests.is_empty() {
        return true;
    }
    let parent = result_request.split_once('/').map_or(result_request, |(r, _)| r);
    requests.iter().any(|r| r == result_request || r == parent)
}

/// The device as CEL sees it, or why it cannot be evaluated.
fn cel_device(driver: &str, device: &Device) -> Result<CelDevice, String> {
    let mut attributes = BTreeMap::new();
    for (name, a) in &device.attributes {
        let value = a
            .value()
            .ok_or_else(|| format!("attribute {name} has no single value"))?;
        attributes.insert(name.to_string(), value);
    }
    let capacity = device
        .capacity
        .iter()
        .map(|(k, c)| (k.clone(), c.value.clone()))
        .collect();
    Ok(CelDevice::new(
        driver,
        &attributes,
        &capacity,
        device.allow_multiple_allocations == Some(true),
    ))
}

/// An attribute by fully qualified name, also in the short form when its domain is the driver's.
fn lookup_attribute(device: &Device, driver: &str, name: &str) -> Option<AttributeValue> {
    if let Some(a) = device.attributes.get(name) {
        return a.value();
    }
    let (domain, id) = name.split_once('/')?;
    if domain != driver {
        return None;
    }
    device.attributes.get(id).and_then(|a| a.value())
}

/// Why `consumed` is not allowed by the policy, if it is not. The policy's default is always
/// allowed; otherwise the value must be one of `validValues`, or lie in `validRange` on a step.
fn policy_violation(consumed: &Quantity, policy: Option<&CapacityRequestPolicy>) -> Option<String> {
    let policy = policy?;
    if policy.default.as_ref() == Some(consumed) {
        return None;
    }
    if !policy.valid_values.is_empty() {
        if policy.valid_values.contains(consumed) {
            return None;
        }
        let list: Vec<String> = policy.valid_values.iter().map(ToString::to_string).collect();
        return Some(format!("not one of the validValues [{}]", list.join(", ")));
    }
    let range = policy.valid_range.as_ref()?;
    if consumed < &range.min {
        return Some(format!("below validRange.min {}", range.min));
    }
    if let Some(max) = &range.max
        && consumed > max
    {
        return Some(format!("above validRange.max {max}"));
    }
    if let Some(step) = &range.step
        && step.nanos() > 0
        && (consumed.nanos() - range.min.nanos()) % step.nanos() != 0
    {
        return Some(format!(
            "not validRange.min {} plus a multiple of step {step}",
            range.min
        ));
    }
    None
}

fn show_attr(v: &AttributeValue) -> String {
    match v {
        AttributeValue::Int(i) => i.to_string(),
        AttributeValue::Bool(b) => b.to_string(),
        AttributeValue::String(s) | AttributeValue::Version(s) => format!("{s:?}"),
        other => format!("{other:?}"),
    }
}

fn show_values(v: &BTreeMap<String, String>) -> String {
    v.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Records `allocations` (as Bind returned them for pod `pod_key`) in `objects`: an existing claim
/// gets its `status.allocation`; a claim generated from a template of the pod is created from the
/// template, as the plugin does, and so is the pod's KEP-5004 special claim. Returns the keys of
/// allocations it could not place (an error in the special claim's rules is one).
pub fn record_allocations(
    objects: &mut Vec<Object>,
    pod_key: &str,
    allocations: &[crate::plugin::ClaimAllocation],
) -> Vec<String> {
    let mut unplaced = Vec::new();
    for a in allocations {
        let existing = objects.iter_mut().find_map(|o| match o {
            Object::ResourceClaim(c) if object_key(&c.metadata.namespace, &c.metadata.name) == a.claim => {
                Some(c)
            }
            _ => None,
        });
        if let Some(claim) = existing {
            claim.status.allocation = Some(a.allocation.clone());
            continue;
        }
        match generated_claim(objects, pod_key, &a.claim).or_else(|| extended_claim(objects, pod_key, a)) {
            Some(mut claim) => {
                claim.status.allocation = Some(a.allocation.clone());
                objects.push(Object::ResourceClaim(Box::new(claim)));
            }
            None => unplaced.push(a.claim.clone()),
        }
    }
    unplaced
}

/// The pod's KEP-5004 special claim, when `a` is for it (its name, a pod without one yet).
fn extended_claim(
    objects: &[Object],
    pod_key: &str,
    a: &crate::plugin::ClaimAllocation,
) -> Option<ResourceClaim> {
    use crate::extended;
    let pod = objects.iter().find_map(|o| match o {
        Object::Pod(p) if o.key() == pod_key => Some(p),
        _ => None,
    })?;
    if pod.status.extended_resource_claim_status.is_some()
        || object_key(&pod.metadata.namespace, &extended::claim_name(pod)) != a.claim
    {
        return None;
    }
    let classes: crate::hashing::FxHashMap<String, _> = objects
        .iter()
        .filter_map(|o| match o {
            Object::DeviceClass(c) => Some((c.metadata.name.to_string(), (**c).clone())),
            _ => None,
        })
        .collect();
    extended::claim_for_allocation(pod, &classes, &a.allocation)
        .ok()
        .flatten()
        .map(|(claim, _)| claim)
}

/// The claim `<pod>-<entry>` generated from the template named by the pod's entry.
fn generated_claim(objects: &[Object], pod_key: &str, claim_key: &str) -> Option<ResourceClaim> {
    let pod = objects.iter().find_map(|o| match o {
        Object::Pod(p) if o.key() == pod_key => Some(p),
        _ => None,
    })?;
    let ns = &pod.metadata.namespace;
    let entry = pod.spec.resource_claims.iter().find(|e| {
        e.resource_claim_template_name.is_some()
            && object_key(ns, &format!("{}-{}", pod.metadata.name, e.name)) == claim_key
    })?;
    let template_key = object_key(ns, entry.resource_claim_template_name.as_deref()?);
    let template = objects.iter().find_map(|o| match o {
        Object::ResourceClaimTemplate(t) if o.key() == template_key => Some(t),
        _ => None,
    })?;
    let mut metadata = template.spec.metadata.clone();
    metadata.name = format!("{}-{}", pod.metadata.name, entry.name).into();
    metadata.namespace = ns.clone();
    Some(ResourceClaim {
        metadata,
        spec: template.spec.spec.clone(),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests;
