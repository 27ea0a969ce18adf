;; Cycle state lost with a trapped instance. prefilter marks the instance "prepared"; filter traps
;; for the node "boom", answers Error "not prepared" on an instance that never ran prefilter, and
;; Success otherwise. With TrapPolicy::Replace the trapped instance is dropped, so the next filter
;; runs on a fresh instance: KsweEngine must re-run PreFilter first for it to succeed.
(module $engine_restore
  (import "k8s.io/scheduler" "currentNodeName" (func $node (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $reason (param i32 i32)))
  (memory (export "memory") 1)
  (global $prepared (mut i32) (i32.const 0))
  (data (i32.const 0) "not prepared")
  (func (export "prefilter") (result i32) (global.set $prepared (i32.const 1)) (i32.const 0))
  (func (export "filter") (result i32)
    ;; "boom" is 4 bytes: compare as one little-endian i32.
    (if (i32.and
          (i32.eq (call $node (i32.const 64) (i32.const 16)) (i32.const 4))
          (i32.eq (i32.load (i32.const 64)) (i32.const 0x6d6f6f62)))
      (then unreachable))
    (if (i32.eqz (global.get $prepared))
      (then (call $reason (i32.const 0) (i32.const 12)) (return (i32.const 1))))
    (i32.const 0))
)
