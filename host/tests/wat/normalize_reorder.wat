;; NormalizeScore (kswe-abi.md §2.1, §10.1). normalizescore echoes the nodeScoreList JSON it gets
;; as the status reason and then sets result.normalized_score_list according to mode_global:
;;   0: {"b":1,"a":2}    the host rebuilds the list from this map (upstream: random Go map order;
;;                       here: name order a, b) and copies it over the input list by index, so for
;;                       input [b, a] node b ends up with a's score. The upstream bug, reproduced.
;;   1: {"a":1}          one entry for two nodes: upstream panics ("size mismatch").
;;   2: null             a nil map: the input list is kept.
;;   3: {oops            invalid JSON: the Go host panics inside the call: the call fails and, as
;;                       the updated list is then empty, the size check panics the host.
(module $normalize_reorder
  (import "k8s.io/scheduler" "nodeScoreList" (func $node_score_list (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.normalized_score_list" (func $set_list (param i32 i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $status_reason (param i32 i32)))
  (memory (export "memory") 1)
  (global $mode (export "mode_global") (mut i32) (i32.const 0))
  (data (i32.const 0) "{\"b\":1,\"a\":2}")
  (data (i32.const 32) "{\"a\":1}")
  (data (i32.const 48) "null")
  (data (i32.const 56) "{oops")
  (func (export "score") (result i64) (i64.const 0))
  (func (export "normalizescore") (result i32)
    (call $status_reason (i32.const 1024) (call $node_score_list (i32.const 1024) (i32.const 1024)))
    (if (i32.eq (global.get $mode) (i32.const 0)) (then (call $set_list (i32.const 0) (i32.const 13))))
    (if (i32.eq (global.get $mode) (i32.const 1)) (then (call $set_list (i32.const 32) (i32.const 7))))
    (if (i32.eq (global.get $mode) (i32.const 2)) (then (call $set_list (i32.const 48) (i32.const 4))))
    (if (i32.eq (global.get $mode) (i32.const 3)) (then (call $set_list (i32.const 56) (i32.const 5))))
    (i32.const 0))
)
