//! The host side of the auditor ([`sharing_affinity_core::audit`]): auditing a cluster file, and
//! the trail `replay --audit` keeps, recording each Bind's allocations into a copy of the cluster
//! and auditing the state after it.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;
use sharing_affinity_core::audit::{Violation, audit_with, record_allocations};
use sharing_affinity_core::cel::CelCache;
use sharing_affinity_core::config::Config;
use sharing_affinity_core::object::Object;
use wasmtime::{Result, format_err};

use crate::replay::{Cluster, PodOutcome};

/// A violation and when the trail first saw it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// The pod whose Bind led to the state, or `None` for the starting state.
    pub after_bind: Option<String>,
    /// The violation.
    #[serde(flatten)]
    pub violation: Violation,
}

/// The cluster state of a replay, audited after every Bind.
pub struct Trail {
    objects: Vec<Object>,
    config: Config,
    cel: CelCache,
    seen: BTreeSet<Violation>,
    /// Each violation once, in the order found.
    pub findings: Vec<Finding>,
    /// Allocations Bind returned for claims the trail could not find or generate.
    pub unplaced: Vec<String>,
}

impl Trail {
    /// Starts a trail on `cluster` with the plugin configuration `config_json` (for extractors
    /// configured instead of published) and audits the starting state.
    pub fn new(cluster: &Cluster, config_json: &str) -> Result<Trail> {
        let config = Config::from_json(config_json).map_err(|e| format_err!("{e}"))?;
        let mut trail = Trail {
            objects: cluster.objects.clone(),
            config,
            cel: CelCache::new(),
            seen: BTreeSet::new(),
            findings: Vec::new(),
            unplaced: Vec::new(),
        };
        trail.check(None);
        Ok(trail)
    }

    /// Records a bound pod's allocations and audits the new state; returns the number of new
    /// violations.
    pub fn after_bind(&mut self, outcome: &PodOutcome) -> usize {
        let unplaced = record_allocations(&mut self.objects, &outcome.pod, &outcome.allocations);
        self.unplaced.extend(unplaced);
        self.check(Some(&outcome.pod))
    }

    fn check(&mut self, after: Option<&str>) -> usize {
        let before = self.findings.len();
        for v in audit_with(&self.objects, &self.config, &self.cel) {
            if self.seen.insert(v.clone()) {
                self.findings.push(Finding {
                    after_bind: after.map(str::to_string),
                    violation: v,
                });
            }
        }
        self.findings.len() - before
    }
}

/// The violations as a table: rule, device, claims, message.
pub fn table(violations: &[Violation]) -> String {
    if violations.is_empty() {
        return "no violations\n".into();
    }
    let mut out = String::new();
    let w_rule = violations
        .iter()
        .map(|v| v.rule.as_str().len())
        .max()
        .unwrap_or(4)
        .max(4);
    let w_dev = violations
        .iter()
        .map(|v| v.device.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(out, "{:w_rule$}  {:w_dev$}  CLAIMS / MESSAGE", "RULE", "DEVICE");
    for v in violations {
        let _ = writeln!(
            out,
            "{:w_rule$}  {:w_dev$}  {}: {}",
            v.rule.as_str(),
            v.device,
            v.claims.join(","),
            v.message
        );
    }
    let _ = writeln!(out, "{} violation(s)", violations.len());
    out
}

/// The findings of a trail as a table, each line naming the Bind after which it appeared.
pub fn findings_table(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "audit: no violations after any bind\n".into();
    }
    let mut out = String::new();
    for f in findings {
        let when = match &f.after_bind {
            Some(pod) => format!("after bind of {pod}"),
            None => "in the starting state".into(),
        };
        let _ = writeln!(out, "audit {when}: {}", f.violation);
    }
    out
}
