;; WASI clocks, random and args as wazero configures them for KSWE (kswe-abi.md §1.5):
;;   prefilter: two realtime readings; returns their difference in milliseconds (fake clock: 1).
;;   filter:    one realtime reading; returns it in whole seconds. The fake wall clock starts at
;;              2022-01-01T00:00:00Z = 1640995200 s and advances 1 ms per reading.
;;   score:     one monotonic reading in milliseconds in the high word (starts at 0, +1 per reading).
;;   reserve:   4 bytes from random_get as the code (deterministic: the same in every instance).
;;   prebind:   argc from args_sizes_get, then args_get; the reason is the argv strings joined
;;              with "|" (no implicit argv[0]). Returns argc.
;; Only `bind` and friends exist to make the mask FSRB valid.
(module $wasi_clock_random
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $status_reason (param i32 i32)))
  (memory (export "memory") 1)
  (func $now (param $id i32) (result i64)
    (drop (call $clock (local.get $id) (i64.const 0) (i32.const 0)))
    (i64.load (i32.const 0)))
  (func (export "prefilter") (result i32)
    (local $t1 i64)
    (local.set $t1 (call $now (i32.const 0)))
    (i32.wrap_i64 (i64.div_u (i64.sub (call $now (i32.const 0)) (local.get $t1)) (i64.const 1000000))))
  (func (export "filter") (result i32)
    (i32.wrap_i64 (i64.div_u (call $now (i32.const 0)) (i64.const 1000000000))))
  (func (export "score") (result i64)
    (i64.shl (i64.div_u (call $now (i32.const 1)) (i64.const 1000000)) (i64.const 32)))
  (func (export "reserve") (result i32)
    (drop (call $random (i32.const 16) (i32.const 4)))
    (i32.load (i32.const 16)))
  (func (export "unreserve"))
  (func (export "prebind") (result i32)
    (local $argc i32) (local $size i32) (local $i i32)
    (drop (call $args_sizes (i32.const 32) (i32.const 36)))
    (local.set $argc (i32.load (i32.const 32)))
    (local.set $size (i32.load (i32.const 36)))
    ;; argv pointers at 64, strings at 256; NULs become "|" so the reason shows the split.
    (drop (call $args_get (i32.const 64) (i32.const 256)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $size)))
        (if (i32.eqz (i32.load8_u (i32.add (i32.const 256) (local.get $i))))
          (then (i32.store8 (i32.add (i32.const 256) (local.get $i)) (i32.const 124))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (call $status_reason (i32.const 256) (local.get $size))
    (local.get $argc))
  (func (export "bind") (result i32) (i32.const 0))
)
