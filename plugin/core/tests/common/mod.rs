//! Fluent builders for Kubernetes DRA objects as JSON, and a runner that drives them through the
//! cycle API. Shared by the upstream-case table and the sharing-affinity scenarios.
#![allow(
    dead_code,
    reason = "each test binary uses a different subset of the builders"
)]

use serde_json::{Value, json};
use sharing_affinity_core::{Code, Status};
use sharing_affinity_core::{EventKind, Plugin};

pub const DRIVER: &str = "driver-a";
pub const NODE: &str = "node-1";
pub const NS: &str = "default";

/// A node with a region label.
pub fn node(name: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Node","metadata":{"name":name,"labels":{"region":"region-1","kubernetes.io/hostname":name}}})
}

/// A DeviceClass with one selector.
pub fn class(name: &str, expr: &str) -> Value {
    json!({"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":name},
           "spec":{"selectors":[{"cel":{"expression":expr}}]}})
}

/// Class A: every device of driver-a.
pub fn class_a() -> Value {
    class("class-a", "device.driver == \"driver-a\"")
}

/// Class MA(b): driver-a devices with allowMultipleAllocations == b.
pub fn class_ma(b: bool) -> Value {
    class(
        if b { "class-ma-true" } else { "class-ma-false" },
        &format!("device.driver == \"driver-a\" && device.allowMultipleAllocations == {b}"),
    )
}

/// A device builder.
#[derive(Clone)]
pub struct Dev(pub Value);

pub fn device(name: &str) -> Dev {
    Dev(json!({"name": name}))
}

impl Dev {
    pub fn ama(mut self) -> Self {
        self.0["allowMultipleAllocations"] = json!(true);
        self
    }
    pub fn not_ama(mut self) -> Self {
        self.0["allowMultipleAllocations"] = json!(false);
        self
    }
    pub fn cap(mut self, name: &str, value: &str) -> Self {
        self.0["capacity"][name] = json!({"value": value});
        self
    }
    /// `R(v)`: value v with policy default 2, validRange {min 2, step 2, max 4}.
    pub fn r(mut self, v: &str) -> Self {
        self.0["capacity"]["capacity-0"] = json!({"value": v,
            "requestPolicy":{"default":"2","validRange":{"min":"2","step":"2","max":"4"}}});
        self
    }
    /// `VV(d, v, extra)`: value v, default d, validValues [d]+extra.
    pub fn vv(mut self, d: &str, v: &str, extra: &[&str]) -> Self {
        let mut values = vec![d.to_string()];
        values.extend(extra.iter().map(|s| s.to_string()));
        self.0["capacity"]["capacity-0"] =
            json!({"value": v, "requestPolicy":{"default": d, "validValues": values}});
        self
    }
    pub fn cap_policy(mut self, name: &str, value: &str, policy: Value) -> Self {
        self.0["capacity"][name] = json!({"value": value, "requestPolicy": policy});
        self
    }
    pub fn attr(mut self, name: &str, typ: &str, v: Value) -> Self {
        self.0["attributes"][name] = json!({ typ: v });
        self
    }
    pub fn raw_attr(mut self, name: &str, v: Value) -> Self {
        self.0["attributes"][name] = v;
        self
    }
    pub fn counters(mut self, set: &str, counters: Value) -> Self {
        let entry = json!({"counterSet": set, "counters": counters});
        match self.0.get_mut("consumesCounters") {
            Some(Value::Array(a)) => a.push(entry),
            _ => self.0["consumesCounters"] = json!([entry]),
        }
        self
    }
    pub fn taint(mut self, key: &str, effect: &str) -> Self {
        self.0["taints"] = json!([{"key": key, "value": "v", "effect": effect}]);
        self
    }
    pub fn binding_conditions(mut self, c: &[&str]) -> Self {
        self.0["bindingConditions"] = json!(c);
        self
    }
}

/// A node-local slice of driver-a on node-1.
pub fn slice(name: &str, pool: &str, generation: i64, count: i64, devices: &[Dev]) -> Value {
    json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":name},
           "spec":{"driver":DRIVER,"nodeName":NODE,"pool":{"name":pool,"generation":generation,"resourceSliceCount":count},
                   "devices": devices.iter().map(|d| d.0.clone()).collect::<Vec<_>>()}})
}

/// The usual single slice with the given devices.
pub fn slice1(devices: &[Dev]) -> Value {
    slice("slice-1", "pool-1", 1, 1, devices)
}

/// A counter slice.
pub fn counter_slice(name: &str, pool: &str, count: i64, sets: Value) -> Value {
    json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":name},
           "spec":{"driver":DRIVER,"nodeName":NODE,"pool":{"name":pool,"generation":1,"resourceSliceCount":count},
                   "sharedCounters": sets}})
}

/// A request builder.
#[derive(Clone)]
pub struct Req(pub Value);

/// `exactly` request with class.
pub fn req(name: &str, class: &str) -> Req {
    Req(json!({"name": name, "exactly": {"deviceClassName": class}}))
}

impl Req {
    pub fn count(mut self, n: i64) -> Self {
        self.0["exactly"]["count"] = json!(n);
        self
    }
    pub fn all(mut self) -> Self {
        self.0["exactly"]["allocationMode"] = json!("All");
        self
    }
    pub fn rq(mut self, v: &str) -> Self {
        self.0["exactly"]["capacity"] = json!({"requests": {"capacity-0": v}});
        self
    }
    pub fn capacity(mut self, reqs: Value) -> Self {
        self.0["exactly"]["capacity"] = json!({ "requests": reqs });
        self
    }
    pub fn selector(mut self, expr: &str) -> Self {
        self.0["exactly"]["selectors"] = json!([{"cel":{"expression": expr}}]);
        self
    }
    pub fn admin(mut self) -> Self {
        self.0["exactly"]["adminAccess"] = json!(true);
        self
    }
    pub fn tolerate(mut self, key: &str) -> Self {
        self.0["exactly"]["tolerations"] = json!([{"key": key, "operator": "Exists"}]);
        self
    }
}

/// A `firstAvailable` request.
pub fn req_first(name: &str, subs: &[Value]) -> Req {
    Req(json!({"name": name, "firstAvailable": subs}))
}

/// A subrequest.
pub fn sub(name: &str, class: &str, extra: Value) -> Value {
    let mut v = json!({"name": name, "deviceClassName": class});
    if let Value::Object(m) = extra {
        for (k, x) in m {
            v[k] = x;
        }
    }
    v
}

/// A claim builder.
#[derive(Clone)]
pub struct Claim(pub Value);

pub fn claim(name: &str, requests: &[Req]) -> Claim {
    Claim(json!({"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
        "metadata":{"name":name,"namespace":NS,"uid":format!("uid-{name}")},
        "spec":{"devices":{"requests": requests.iter().map(|r| r.0.clone()).collect::<Vec<_>>()}}}))
}

impl Claim {
    pub fn constraint(mut self, c: Value) -> Self {
        match self.0["spec"]["devices"].get_mut("constraints") {
            Some(Value::Array(a)) => a.push(c),
            _ => self.0["spec"]["devices"]["constraints"] = json!([c]),
        }
        self
    }
    /// An opaque config object, scoped to `requests` (empty = all).
    pub fn config(mut self, requests: &[&str], parameters: Value) -> Self {
        let c = json!({"requests": requests, "opaque": {"driver": DRIVER, "parameters": parameters}});
        match self.0["spec"]["devices"].get_mut("config") {
            Some(Value::Array(a)) => a.push(c),
            _ => self.0["spec"]["devices"]["config"] = json!([c]),
        }
        self
    }
    /// Marks the claim allocated with these results (driver-a/pool-1), on node-1.
    pub fn allocated(mut self, results: Value) -> Self {
        self.0["status"] = json!({"allocation": {"devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":[NODE]}]}]}}});
        self
    }
    pub fn json(&self) -> Value {
        self.0.clone()
    }
}

/// A dedicated allocation result.
pub fn dedicated(request: &str, device: &str) -> Value {
    json!({"request": request, "driver": DRIVER, "pool": "pool-1", "device": device})
}

/// A shared allocation result with consumed capacity.
pub fn shared(request: &str, device: &str, share: &str, consumed: Value) -> Value {
    json!({"request": request, "driver": DRIVER, "pool": "pool-1", "device": device, "shareID": share,
           "consumedCapacity": consumed})
}

/// A pending pod using the named claims.
pub fn pod(name: &str, claims: &[&str], created: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":NS,"uid":format!("uid-{name}"),
            "creationTimestamp": created},
           "spec":{"resourceClaims": claims.iter().map(|c| json!({"name": c, "resourceClaimName": c})).collect::<Vec<_>>()}})
}

/// A plugin loaded with the objects.
pub fn plugin(config: &str, objects: &[Value]) -> Plugin {
    let mut p = Plugin::new(config).expect("valid config");
    for o in objects {
        p.apply(EventKind::Add, &o.to_string())
            .unwrap_or_else(|e| panic!("object {o}: {e}"));
    }
    p
}

/// One allocated device as compared by the tests: (request, device, shared, consumed).
pub type Got = (String, String, bool, Option<Vec<(String, String)>>);

/// Runs one cycle of `pod` on node-1: the filter status and, on success, per claim the results.
pub fn run(p: &mut Plugin, pod: &str) -> Result<Vec<Vec<Got>>, Status> {
    let st = p.prefilter(&format!("{NS}/{pod}"));
    if !st.is_success() {
        return Err(st);
    }
    let st = p.filter(NODE);
    if !st.is_success() {
        return Err(st);
    }
    let allocs = p.reserve(NODE)?;
    Ok(allocs
        .iter()
        .map(|a| {
            a.allocation
                .devices
                .results
                .iter()
                .map(|r| {
                    (
                        r.request.to_string(),
                        r.device.to_string(),
                        r.share_id.is_some(),
                        r.consumed_capacity
                            .as_ref()
                            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()),
                    )
                })
                .collect()
        })
        .collect())
}

/// Schedules `pod` and binds it on node-1 (panics when it does not fit).
pub fn schedule(p: &mut Plugin, pod: &str) -> Vec<Vec<Got>> {
    let got = run(p, pod).unwrap_or_else(|s| panic!("pod {pod}: {s}"));
    p.bind(&format!("{NS}/{pod}"), NODE).expect("bind");
    got
}

/// Shorthand for an expected result.
pub fn g(request: &str, device: &str, shared: bool, consumed: Option<&[(&str, &str)]>) -> Got {
    (
        request.to_string(),
        device.to_string(),
        shared,
        consumed.map(|c| c.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
    )
}

/// Asserts the status code and that the reason contains `needle`.
pub fn assert_status(got: Result<Vec<Vec<Got>>, Status>, code: Code, needle: &str, msg: &str) {
    match got {
        Ok(r) => panic!("{msg}: expected {code} containing {needle:?}, got allocation {r:?}"),
        Err(s) => {
            assert_eq!(s.code, code, "{msg}: {s}");
            assert!(
                s.reason.contains(needle),
                "{msg}: reason {:?} lacks {needle:?}",
                s.reason
            );
        }
    }
}
