//! The adapter's protocol handling against the native fake host and a fake core.

use prost::Message;
use sharing_affinity_core::contract::Scheduler;
use sharing_affinity_core::model::{AllocationResult, Pod};
use sharing_affinity_core::{BindingPoll, ClaimAllocation, EventKind, PostFilter};
use sharing_affinity_core::{Code, Status};
use sharing_affinity_kswe_proto as proto;

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::adapter::{Backend, GuestState, Reply};
use super::exports::with_slot;
use super::imports::{FakeHost, with_host};

/// Records what the adapter asked of the core.
#[derive(Default)]
struct Fake {
    generation: u32,
    calls: Vec<String>,
    /// `set_time` calls.
    times: Vec<i64>,
}

thread_local! {
    static GENERATION: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Each claim's allocation as the fake core's informer state holds it (`stored_differs`).
    static STORED: RefCell<BTreeMap<String, Option<AllocationResult>>> = const { RefCell::new(BTreeMap::new()) };
    /// What the fake core's `binding_poll` answers, in turn (then `Ready`), and the `polls`
    /// numbers it was asked with.
    static POLLS: RefCell<(Vec<BindingPoll>, Vec<u32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

fn allocation(device: &str) -> AllocationResult {
    serde_json::from_str(&format!(
        r#"{{"devices":{{"results":[{{"request":"r","driver":"d","pool":"p","device":"{device}"}}]}}}}"#
    ))
    .unwrap()
}

impl Scheduler for Fake {
    fn prefilter(&mut self, pod: &str) -> Status {
        self.calls.push(format!("prefilter {pod}"));
        Status::success()
    }
    fn filter(&mut self, node: &str) -> Status {
        assert_ne!(node, "panic", "a bug in the core");
        if node == "full" {
            Status::unschedulable("no device left")
        } else {
            Status::success()
        }
    }
    fn prescore(&mut self, nodes: &[String]) -> Status {
        self.calls.push(format!("prescore {}", nodes.join(",")));
        Status::success()
    }
    fn score(&mut self, node: &str) -> Result<u32, Status> {
        if node == "broken" {
            Err(Status::error("cannot score"))
        } else {
            Ok(73)
        }
    }
    fn set_time(&mut self, unix_seconds: i64) {
        self.times.push(unix_seconds);
    }
    fn postfilter(&mut self, pod: &str, _nodes: &[String]) -> (Status, Option<String>) {
        let answer = self.postfilter_answer(pod);
        (answer.status, answer.deallocate.map(|(claim, _)| claim))
    }
    fn reserve(&mut self, _node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        Ok(vec![ClaimAllocation {
            claim: "ns/c".into(),
            allocation: allocation("x"),
        }])
    }
    fn unreserve(&mut self, pod: &str, node: &str) -> Result<(), Status> {
        self.calls.push(format!("unreserve {pod} {node}"));
        Ok(())
    }
    fn bind(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        self.calls.push(format!("bind {pod} {node}"));
        Ok(vec![ClaimAllocation {
            claim: "ns/c".into(),
            allocation: allocation("x"),
        }])
    }
}

impl Backend for Fake {
    fn create(config: &str) -> Result<Self, String> {
        if config == "bad" {
            return Err("field sharingAffinity: invalid".into());
        }
        let generation = GENERATION.with(|g| {
            g.set(g.get() + 1);
            g.get()
        });
        Ok(Fake {
            generation,
            ..Fake::default()
        })
    }
    fn apply(&mut self, kind: EventKind, object_json: &str) -> Result<(), String> {
        let v: serde_json::Value = serde_json::from_str(object_json).map_err(|e| e.to_string())?;
        let name = v["metadata"]["name"].as_str().unwrap_or("").to_string();
        if name == "broken" {
            return Err("spec.devices[0]: bad".into());
        }
        self.calls
            .push(format!("{kind:?} {} {name}", v["kind"].as_str().unwrap_or("")));
        Ok(())
    }
    fn postfilter_answer(&mut self, pod: &str) -> PostFilter {
        self.calls.push(format!("postfilter {pod}"));
        PostFilter {
            status: Status::unschedulable("deallocation of ResourceClaim completed"),
            deallocate: Some(("ns/c".into(), "7".into())),
        }
    }
    fn record_binding(&mut self, pod: &str, node: &str) -> Result<Vec<ClaimAllocation>, Status> {
        self.bind(pod, node)
    }
    fn binding_poll(&self, _pod: &str, polls: u32) -> BindingPoll {
        POLLS.with(|p| {
            let mut p = p.borrow_mut();
            p.1.push(polls);
            if p.0.is_empty() {
                BindingPoll::Ready
            } else {
                p.0.remove(0)
            }
        })
    }
    fn unbind(&mut self, pod: &str) {
        self.calls.push(format!("unbind {pod}"));
    }
    fn stored_differs(&self, claim: &str, allocation: &AllocationResult) -> bool {
        STORED.with(|s| {
            s.borrow()
                .get(claim)
                .is_some_and(|stored| stored.as_ref() != Some(allocation))
        })
    }
}

fn reset(config: &str) {
    STORED.with(|s| s.borrow_mut().clear());
    POLLS.with(|p| *p.borrow_mut() = (Vec::new(), Vec::new()));
    with_host(|h| {
        *h = FakeHost {
            config: config.into(),
            ..FakeHost::default()
        }
    });
}

fn set_pod(json: &str) {
    let pod: Pod = serde_json::from_str(json).unwrap();
    let bytes = proto::pod_to_proto(&pod).unwrap().encode_to_vec();
    with_host(|h| h.pod = bytes);
}

fn feed(cursor: &str, resync: bool, events: &[(&str, &str, &str)]) {
    let events: Vec<String> = events
        .iter()
        .map(|(t, kind, name)| format!(r#"{{"type":"{t}","object":{{"kind":"{kind}","metadata":{{"name":"{name}","namespace":"ns"}}}}}}"#))
        .collect();
    let doc = format!(
        r#"{{"cursor":"{cursor}","resync":{resync},"events":[{}]}}"#,
        events.join(",")
    );
    with_host(|h| h.feed = doc);
}

#[test]
fn prefilter_applies_the_feed_then_the_pod_then_starts_the_cycle() {
    reset("");
    set_pod(
        r#"{"metadata":{"name":"p","namespace":"ns","uid":"u"},"spec":{"resourceClaims":[{"name":"g","resourceClaimName":"c"}]}}"#,
    );
    feed(
        "e.2",
        true,
        &[("ADDED", "ResourceClaim", "c"), ("ADDED", "Node", "n")],
    );
    let mut s = GuestState::<Fake>::start().unwrap();
    let first = s.backend().generation;
    assert_eq!(
        s.prefilter(),
        Reply {
            code: 0,
            reason: String::new()
        }
    );
    assert_eq!(
        s.backend().calls,
        [
            "Add ResourceClaim c",
            "Add Node n",
            "Update Pod p",
            "prefilter ns/p"
        ]
    );
    assert_eq!(s.cursor(), "e.2");
    assert_eq!(
        s.backend().generation,
        first + 1,
        "a resync rebuilds the core plugin"
    );

    feed(
        "e.3",
        false,
        &[("MODIFIED", "ResourceClaim", "c"), ("DELETED", "Node", "n")],
    );
    s.prefilter();
    assert_eq!(
        with_host(|h| h.cursors.clone()),
        ["", "e.2"],
        "the cursor of the last feed is sent"
    );
    assert_eq!(
        &s.backend().calls[4..],
        [
            "Update ResourceClaim c",
            "Delete Node n",
            "Update Pod p",
            "prefilter ns/p"
        ]
    );
    assert_eq!(s.backend().generation, first + 1, "no resync: the same plugin");
}

#[test]
fn a_rejected_object_is_logged_and_the_rest_applies() {
    reset("");
    set_pod(r#"{"metadata":{"name":"p","namespace":"ns"}}"#);
    feed(
        "e.1",
        true,
        &[("ADDED", "ResourceSlice", "broken"), ("ADDED", "Node", "n")],
    );
    let mut s = GuestState::<Fake>::start().unwrap();
    assert_eq!(s.prefilter().code, 0);
    assert!(s.backend().calls.contains(&"Add Node n".to_string()));
    let logs = with_host(|h| h.logs.clone());
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0].0, 2, "error severity");
    assert_eq!(
        logs[0].2,
        [
            "object",
            "ResourceSlice ns/broken",
            "error",
            "spec.devices[0]: bad"
        ]
    );
}

#[test]
fn broken_feed_or_pod_is_an_error_naming_what_broke() {
    reset("");
    with_host(|h| h.feed = r#"{"cursor":"x","events":[]}"#.into());
    let mut s = GuestState::<Fake>::start().unwrap();
    let reply = s.prefilter();
    assert_eq!(reply.code, Code::Error as i32);
    assert!(reply.reason.contains("field resync"), "{}", reply.reason);
    assert_eq!(s.cursor(), "", "the cursor only moves after a good document");
    feed("e.1", false, &[]);
    with_host(|h| h.pod = vec![0xff, 0xff, 0xff]);
    let reply = s.prefilter();
    assert!(
        reply.reason.starts_with("currentPod: invalid protobuf"),
        "{}",
        reply.reason
    );
}

#[test]
fn a_paged_feed_is_read_until_a_page_has_no_more() {
    reset("");
    set_pod(r#"{"metadata":{"name":"p","namespace":"ns"}}"#);
    let page = |cursor: &str, resync: bool, more: bool, node: &str| {
        format!(
            r#"{{"cursor":"{cursor}","resync":{resync},"more":{more},"events":[{{"type":"ADDED","object":{{"kind":"Node","metadata":{{"name":"{node}"}}}}}}]}}"#
        )
    };
    with_host(|h| {
        h.pages.insert(String::new(), page("e.1", true, true, "a"));
        h.pages.insert("e.1".into(), page("e.2", false, true, "b"));
        h.feed = page("e.3", false, false, "c");
    });
    let mut s = GuestState::<Fake>::start().unwrap();
    assert_eq!(s.prefilter().code, 0);
    assert_eq!(with_host(|h| h.cursors.clone()), ["", "e.1", "e.2"]);
    assert_eq!(
        s.backend().calls,
        [
            "Add Node a",
            "Add Node b",
            "Add Node c",
            "Update Pod p",
            "prefilter ns/p"
        ]
    );
    assert_eq!(s.cursor(), "e.3");

    // A page asking for more without moving the cursor would loop: an error naming the field.
    with_host(|h| h.feed = page("e.3", false, true, "c"));
    let reply = s.prefilter();
    assert_eq!(reply.code, Code::Error as i32);
    assert!(reply.reason.contains("field more"), "{}", reply.reason);
}

#[test]
fn large_values_are_read_with_a_retry() {
    let config = "x".repeat(5000);
    reset(&config);
    let many: Vec<(&str, &str, String)> = (0..200)
        .map(|i| ("ADDED", "Node", format!("node-{i:04}")))
        .collect();
    let refs: Vec<(&str, &str, &str)> = many.iter().map(|(a, b, c)| (*a, *b, c.as_str())).collect();
    feed("e.9", true, &refs);
    set_pod(r#"{"metadata":{"name":"p","namespace":"ns"}}"#);
    let mut s = GuestState::<Fake>::start().unwrap();
    assert_eq!(s.prefilter().code, 0);
    assert_eq!(s.backend().calls.len(), 202, "200 nodes, the pod, prefilter");
    assert_eq!(
        with_host(|h| h.cursors.len()),
        2,
        "the feed exceeded 2 KiB: asked twice"
    );
}

#[test]
fn start_fails_on_a_configuration_the_core_rejects() {
    reset("bad");
    let err = GuestState::<Fake>::start().err().unwrap();
    assert_eq!(err, "guestConfig: field sharingAffinity: invalid");
}

/// Sets `currentPod` to the pod `ns/<name>` with UID `uid-<name>`.
fn current(name: &str) {
    set_pod(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}"}}}}"#
    ));
}

/// A state with a scheduling cycle for `ns/<name>`.
fn cycle_for(name: &str) -> GuestState<Fake> {
    reset("");
    feed("e.1", false, &[]);
    current(name);
    let mut s = GuestState::<Fake>::start().unwrap();
    assert_eq!(s.prefilter().code, 0);
    s
}

#[test]
fn filter_and_score_use_the_current_node() {
    let mut s = cycle_for("p");
    with_host(|h| h.node = "full".into());
    assert_eq!(
        s.filter(),
        Reply {
            code: Code::Unschedulable as i32,
            reason: "no device left".into()
        }
    );
    with_host(|h| h.node = "n1".into());
    assert_eq!(s.filter().code, 0);
    assert_eq!(
        s.score(),
        (
            73,
            Reply {
                code: 0,
                reason: String::new()
            }
        )
    );
    with_host(|h| h.node = "broken".into());
    assert_eq!(
        s.score(),
        (
            0,
            Reply {
                code: 1,
                reason: "cannot score".into()
            }
        )
    );
}

#[test]
fn prescore_passes_the_filtered_node_list_and_rejects_bad_json() {
    let mut s = cycle_for("p");
    with_host(|h| h.filtered = r#"["n1","n2"]"#.into());
    assert_eq!(s.prescore().code, 0);
    assert!(
        s.backend().calls.iter().any(|c| c == "prescore n1,n2"),
        "{:?}",
        s.backend().calls
    );
    with_host(|h| h.filtered = r#"{"n1": 1}"#.into());
    let reply = s.prescore();
    assert_eq!(reply.code, 1);
    assert!(
        reply
            .reason
            .contains("filteredNodeList: not a JSON array of node names"),
        "{}",
        reply.reason
    );
}

#[test]
fn prefilter_and_prebind_give_the_core_the_hosts_time() {
    let mut s = cycle_for("p");
    with_host(|h| {
        h.node = "n1".into();
        h.now = 1_767_225_600;
    });
    assert_eq!(s.reserve().code, 0);
    assert_eq!(s.permit().code, 0);
    assert_eq!(s.prebind().code, 0);
    assert_eq!(s.backend().times.last(), Some(&1_767_225_600), "set before Bind");
    with_host(|h| h.now = 1_767_225_700);
    assert_eq!(s.prefilter().code, 0);
    assert_eq!(
        s.backend().times.last(),
        Some(&1_767_225_700),
        "set before PreFilter"
    );
}

#[test]
fn prebind_waits_with_the_host_until_the_binding_conditions_hold() {
    // docs/kswe-dra-extension.md §2.5: after the write, check; on `Wait`, the host's `wait`,
    // the change feed and the time, then check again.
    let mut s = cycle_for("p");
    with_host(|h| {
        h.node = "n1".into();
        h.now = 1_000;
    });
    POLLS.with(|p| p.borrow_mut().0 = vec![BindingPoll::Wait(5), BindingPoll::Wait(5)]);
    assert_eq!(s.reserve().code, 0);
    assert_eq!(s.permit().code, 0);
    let pulls = with_host(|h| h.cursors.len());
    assert_eq!(s.prebind(), Reply::ok());
    assert_eq!(with_host(|h| h.waits.clone()), [5, 5]);
    assert_eq!(POLLS.with(|p| p.borrow().1.clone()), [0, 1, 2]);
    assert_eq!(
        with_host(|h| h.cursors.len()),
        pulls + 2,
        "the feed after each wait"
    );
    assert_eq!(s.backend().times.last(), Some(&1_010), "the time after each wait");
    assert_eq!(with_host(|h| h.allocations.len()), 1, "written before the wait");
    assert!(!s.backend().calls.iter().any(|c| c.starts_with("unbind")));
}

#[test]
fn a_failed_wait_fails_prebind_and_the_core_takes_the_binding_back() {
    let mut s = cycle_for("p");
    with_host(|h| h.node = "n1".into());
    POLLS.with(|p| {
        p.borrow_mut().0 = vec![
            BindingPoll::Wait(5),
            BindingPoll::Failed(Status::error("claim c binding timeout")),
        ]
    });
    assert_eq!(s.reserve().code, 0);
    assert_eq!(s.permit().code, 0);
    let reply = s.prebind();
    assert_eq!(reply.code, Code::Error as i32);
    assert_eq!(reply.reason, "claim c binding timeout");
    assert_eq!(s.backend().calls.last().map(String::as_str), Some("unbind ns/p"));

    // The host's wait ends early (its context is done): PreBind fails, naming the result.
    let mut s = cycle_for("q");
    with_host(|h| {
        h.node = "n1".into();
        h.wait_result = 5;
    });
    POLLS.with(|p| p.borrow_mut().0 = vec![BindingPoll::Wait(5)]);
    assert_eq!(s.reserve().code, 0);
    assert_eq!(s.permit().code, 0);
    let reply = s.prebind();
    assert_eq!(reply.code, Code::Error as i32);
    assert_eq!(
        reply.reason,
        "sharing-affinity.dra/v1.wait: the wait ended early: the call's context is done (code 5)"
    );
    assert_eq!(s.backend().calls.last().map(String::as_str), Some("unbind ns/q"));
}

#[test]
fn reserve_and_prebind_hand_allocations_to_the_host() {
    let mut s = cycle_for("p");
    with_host(|h| h.node = "n1".into());
    assert_eq!(s.reserve().code, 0);
    assert_eq!(s.permit().code, 0);
    assert_eq!(s.prebind().code, 0);
    let (pending, written) = with_host(|h| (h.pending.clone(), h.allocations.clone()));
    assert_eq!(pending.len(), 1);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].0, "ns/c");
    let back: AllocationResult = serde_json::from_str(&written[0].1).unwrap();
    assert_eq!(back, allocation("x"), "the JSON is the allocation");
    assert_eq!(s.backend().calls.last().map(String::as_str), Some("bind ns/p n1"));
    assert!(s.reservations().is_empty(), "bound: no longer in flight");
}

#[test]
fn postfilter_asks_the_host_to_deallocate_the_claim_the_core_names() {
    let mut s = cycle_for("p");
    let reply = s.postfilter();
    assert_eq!(
        reply,
        Reply {
            code: Code::Unschedulable as i32,
            reason: "deallocation of ResourceClaim completed".into()
        }
    );
    assert_eq!(
        s.backend().calls.last().map(String::as_str),
        Some("postfilter ns/p")
    );
    assert_eq!(
        with_host(|h| h.deallocations.clone()),
        vec![("ns/c".to_string(), "7".to_string())],
        "the claim and the resourceVersion the core saw"
    );
    // The host refuses because the claim changed since: Unschedulable (the change requeues the
    // pod); any other refusal is an Error naming the claim and the meaning.
    with_host(|h| h.write_result = 3);
    let reply = s.postfilter();
    assert_eq!(reply.code, Code::Unschedulable as i32);
    assert!(
        reply.reason.contains("claim ns/c changed since PreFilter"),
        "{}",
        reply.reason
    );
    with_host(|h| h.write_result = 1);
    let reply = s.postfilter();
    assert_eq!(reply.code, Code::Error as i32);
    assert!(
        reply.reason.contains("deallocation for claim ns/c") && reply.reason.contains("does not exist"),
        "{}",
        reply.reason
    );
}

#[test]
fn unreserve_drops_only_the_current_pods_reservation() {
    let mut s = cycle_for("a");
    with_host(|h| h.node = "n1".into());
    assert_eq!(s.reserve().code, 0);
    current("b");
    assert_eq!(s.prefilter().code, 0);
    s.unreserve();
    assert!(
        !s.backend().calls.iter().any(|c| c.starts_with("unreserve")),
        "b holds nothing: {:?}",
        s.backend().calls
    );
    current("a");
    s.unreserve();
    assert_eq!(
        s.backend().calls.last().map(String::as_str),
        Some("unreserve ns/a n1")
    );
    assert!(s.reservations().is_empty());
}

#[test]
fn the_next_pods_prefilter_keeps_a_reservation_in_flight() {
    // Pod a reserved; pod b's scheduling cycle starts on the same instance before a's binding
    // cycle (upstream without a `permit` export); then a's PreBind.
    let mut s = cycle_for("a");
    with_host(|h| h.node = "n1".into());
    assert_eq!(s.reserve().code, 0);
    current("b");
    assert_eq!(s.prefilter().code, 0);
    assert_eq!(s.filter().code, 0, "b's cycle works");
    current("a");
    assert_eq!(s.prebind(), Reply::ok(), "a's reservation survived b's PreFilter");
    assert_eq!(s.backend().calls.last().map(String::as_str), Some("bind ns/a n1"));
    current("b");
    assert_eq!(s.filter().code, 0, "b's cycle survived a's PreBind");
}

#[test]
fn a_hook_for_a_pod_without_a_cycle_or_reservation_is_an_error_naming_it() {
    let mut s = cycle_for("a");
    with_host(|h| h.node = "n1".into());
    current("other");
    for (hook, reply) in [
        ("Filter", s.filter()),
        ("Score", s.score().1),
        ("Reserve", s.reserve()),
        ("Permit", s.permit()),
        ("PreBind", s.prebind()),
    ] {
        assert_eq!(reply.code, Code::Error as i32, "{hook}");
        assert!(
            reply.reason.starts_with(r#"pod ns/other (uid "uid-other"): "#) && reply.reason.contains(hook),
            "{hook}: {}",
            reply.reason
        );
    }
    current("a");
    assert_eq!(s.filter().code, 0, "a's cycle is untouched");
    let mut fresh = GuestState::<Fake>::start().unwrap();
    let reply = fresh.filter();
    assert!(
        reply.reason.contains("has no scheduling cycle"),
        "{}",
        reply.reason
    );
}

#[test]
fn a_reservation_the_host_dropped_is_released_at_the_next_prefilter() {
    let mut s = cycle_for("a");
    with_host(|h| h.node = "n1".into());
    assert_eq!(s.reserve().code, 0);
    // Upstream ran a's Unreserve on another instance: the host dropped the pending allocation,
    // and this instance's feed shows the claim unallocated.
    feed("e.2", false, &[("MODIFIED", "ResourceClaim", "c")]);
    stored("ns/c", None);
    current("b");
    assert_eq!(s.prefilter().code, 0);
    assert!(s.reservations().is_empty(), "a's stale reservation is gone");
    assert!(
        s.backend().calls.contains(&"unreserve ns/a n1".to_string()),
        "{:?}",
        s.backend().calls
    );
}

#[test]
fn a_reservation_the_host_still_shows_is_kept() {
    let mut s = cycle_for("a");
    with_host(|h| h.node = "n1".into());
    assert_eq!(s.reserve().code, 0);
    stored("ns/c", Some(allocation("x")));
    current("b");
    assert_eq!(s.prefilter().code, 0);
    assert_eq!(s.reservations().len(), 1);
}

/// Sets what the fake core reports as the stored allocation of a claim.
fn stored(claim: &str, allocation: Option<AllocationResult>) {
    STORED.with(|s| s.borrow_mut().insert(claim.to_string(), allocation));
}

#[test]
fn a_panic_mid_call_loses_the_state_and_the_next_call_rebuilds_it() {
    reset("");
    feed("e.1", true, &[]);
    current("a");
    let slot: RefCell<Option<GuestState<Fake>>> = RefCell::new(None);
    assert_eq!(with_slot(&slot, GuestState::prefilter).code, 0);
    let first = slot.borrow().as_ref().map(|s| s.backend().generation);
    with_host(|h| h.node = "panic".into());
    let trapped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        with_slot(&slot, GuestState::filter)
    }));
    assert!(trapped.is_err(), "the call trapped");
    assert!(slot.borrow().is_none(), "the state did not come back");
    assert!(slot.try_borrow_mut().is_ok(), "and no borrow is left behind");
    with_host(|h| h.node = "n1".into());
    let reply = with_slot(&slot, GuestState::filter);
    assert!(
        reply.code == 1 && reply.reason.contains("no scheduling cycle"),
        "the cycle died with the state: {}",
        reply.reason
    );
    let cursors_before = with_host(|h| h.cursors.len());
    assert_eq!(with_slot(&slot, GuestState::prefilter).code, 0);
    assert_eq!(
        with_host(|h| h.cursors[cursors_before].clone()),
        "",
        "the rebuilt state reads the feed from the start"
    );
    assert_ne!(slot.borrow().as_ref().map(|s| s.backend().generation), first);
    assert_eq!(with_slot(&slot, GuestState::filter).code, 0, "and goes on");
}

#[test]
fn a_refused_write_is_an_error_and_forces_a_resync() {
    reset("");
    set_pod(r#"{"metadata":{"name":"p","namespace":"ns"}}"#);
    feed("e.5", false, &[]);
    with_host(|h| h.node = "n1".into());
    let mut s = GuestState::<Fake>::start().unwrap();
    s.prefilter();
    assert_eq!(s.cursor(), "e.5");
    assert_eq!(s.reserve().code, 0);
    with_host(|h| h.write_result = 3);
    let reply = s.prebind();
    assert_eq!(reply.code, 1);
    assert_eq!(
        reply.reason,
        "sharing-affinity.dra/v1.allocation for claim ns/c: the claim is already allocated differently (code 3)"
    );
    assert_eq!(s.cursor(), "", "the next PreFilter asks for a full snapshot");
}
