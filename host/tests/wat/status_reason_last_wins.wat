;; Results are per call and the last setter call wins (kswe-abi.md §1.1):
;;   filter:    sets the reason to "first", then "second"; returns 2 (Unschedulable).
;;              Expected: (2, "second").
;;   score:     sets no reason; returns (0, 3). Expected reason "": nothing leaks from filter.
;;   prefilter: sets node_names "a\0b\0", then "c\0d" (no trailing NUL: "d" is dropped, as
;;              upstream's fromNULTerminated does). Expected names ["c"].
;;   reserve:   passes a pointer outside memory to result.status_reason. Expected reason
;;              "BUG: out of memory reading message" (the host does not trap); returns 1.
(module $status_reason_last_wins
  (import "k8s.io/scheduler" "result.status_reason" (func $status_reason (param i32 i32)))
  (import "k8s.io/scheduler" "result.node_names" (func $node_names (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "first")
  (data (i32.const 8) "second")
  (data (i32.const 16) "a\00b\00")
  (data (i32.const 24) "c\00d")
  (func (export "filter") (result i32)
    (call $status_reason (i32.const 0) (i32.const 5))
    (call $status_reason (i32.const 8) (i32.const 6))
    (i32.const 2))
  (func (export "score") (result i64) (i64.const 3))
  (func (export "prefilter") (result i32)
    (call $node_names (i32.const 16) (i32.const 4))
    (call $node_names (i32.const 24) (i32.const 3))
    (i32.const 0))
  (func (export "reserve") (result i32)
    (call $status_reason (i32.const 0xFFFFFF00) (i32.const 64))
    (i32.const 1))
  (func (export "unreserve"))
)
