;; The sharing-affinity.dra/v1 imports (docs/kswe-dra-extension.md), with mask FSRB.
;;   _start:    calls changes("", buf, 0) only to learn the feed's length (callable in _start);
;;              stores it in start_len_global; calls wait(5) (no pod: 4) into start_wait_global.
;;   prefilter: changes(cursor "", buf 4096, limit 60000); sets the reason to the document;
;;              returns 0.
;;   filter:    when probe_global is 1: allocation("ns/c", "{bad") -> 2 (invalid JSON), returned
;;              as the code; otherwise 0.
;;   score:     when probe_global is 1: allocation("ns/missing", valid) -> 1 (not found), in the
;;              high word; otherwise 0.
;;   reserve:   pending_allocation("ns/c", valid) -> 0.
;;   prebind:   allocation("ns/c", valid) -> 0; then allocation("ns/c", other) -> 3 (conflict);
;;              wait(0) and wait(601) -> 2; wait(5) -> 0 and now() is 5 s later; _start's wait
;;              gave 4. Returns 0 when all results are as expected, 1 otherwise.
;;   bind:      returns 5 (Skip): the default binder binds.
(module $dra_extension
  (import "sharing-affinity.dra/v1" "changes" (func $changes (param i32 i32 i32 i32) (result i32)))
  (import "sharing-affinity.dra/v1" "allocation" (func $allocation (param i32 i32 i32 i32) (result i32)))
  (import "sharing-affinity.dra/v1" "pending_allocation" (func $pending (param i32 i32 i32 i32) (result i32)))
  (import "sharing-affinity.dra/v1" "now" (func $now (result i64)))
  (import "sharing-affinity.dra/v1" "wait" (func $wait (param i32) (result i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $status_reason (param i32 i32)))
  (memory (export "memory") 2)
  (global $start_len (export "start_len_global") (mut i32) (i32.const 0))
  (global $probe (export "probe_global") (mut i32) (i32.const 0))
  (global $start_wait (export "start_wait_global") (mut i32) (i32.const 0))
  (data (i32.const 0) "ns/c")
  (data (i32.const 8) "ns/missing")
  (data (i32.const 32) "{bad")
  ;; 64: a valid allocation (78 bytes); 256: a different one (82 bytes).
  (data (i32.const 64) "{\"devices\":{\"results\":[{\"request\":\"r\",\"driver\":\"d\",\"pool\":\"p\",\"device\":\"x\"}]}}")
  (data (i32.const 256) "{\"devices\":{\"results\":[{\"request\":\"r\",\"driver\":\"d\",\"pool\":\"p\",\"device\":\"other\"}]}}")
  (func (export "_start")
    (global.set $start_len (call $changes (i32.const 0) (i32.const 0) (i32.const 4096) (i32.const 0)))
    (global.set $start_wait (call $wait (i32.const 5))))
  (func (export "prefilter") (result i32)
    (local $n i32)
    (local.set $n (call $changes (i32.const 0) (i32.const 0) (i32.const 4096) (i32.const 60000)))
    (call $status_reason (i32.const 4096) (local.get $n))
    (i32.const 0))
  (func (export "filter") (result i32)
    (if (result i32) (global.get $probe)
      (then (call $allocation (i32.const 0) (i32.const 4) (i32.const 32) (i32.const 4)))
      (else (i32.const 0))))
  (func (export "score") (result i64)
    (if (i32.eqz (global.get $probe)) (then (return (i64.const 0))))
    (i64.shl
      (i64.extend_i32_u (call $allocation (i32.const 8) (i32.const 10) (i32.const 64) (i32.const 78)))
      (i64.const 32)))
  (func (export "reserve") (result i32)
    (call $pending (i32.const 0) (i32.const 4) (i32.const 64) (i32.const 78)))
  (func (export "unreserve"))
  (func (export "prebind") (result i32)
    (local $ok i32)
    (local $t i64)
    (local.set $ok
      (i32.and
        (i32.eqz (call $allocation (i32.const 0) (i32.const 4) (i32.const 64) (i32.const 78)))
        (i32.eq (call $allocation (i32.const 0) (i32.const 4) (i32.const 256) (i32.const 82)) (i32.const 3))))
    (local.set $ok (i32.and (local.get $ok) (i32.eq (global.get $start_wait) (i32.const 4))))
    (local.set $ok (i32.and (local.get $ok) (i32.eq (call $wait (i32.const 0)) (i32.const 2))))
    (local.set $ok (i32.and (local.get $ok) (i32.eq (call $wait (i32.const 601)) (i32.const 2))))
    (local.set $t (call $now))
    (local.set $ok (i32.and (local.get $ok) (i32.eqz (call $wait (i32.const 5)))))
    (local.set $ok (i32.and (local.get $ok) (i64.eq (call $now) (i64.add (local.get $t) (i64.const 5)))))
    (if (result i32) (local.get $ok)
      (then (i32.const 0))
      (else (i32.const 1))))
  (func (export "bind") (result i32) (i32.const 5))
  (func (export "postbind"))
)
