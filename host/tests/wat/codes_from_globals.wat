;; Every hook returns values read from exported mutable globals, so a test can make the guest
;; return any i32 (i32::MIN, i32::MAX, ...) and check how the host unpacks it (kswe-abi.md §2.1):
;;   prefilter, filter, addpod, removepod, prescore, normalizescore, reserve, prebind, bind:
;;               code = status_code_global
;;   score:      i64, high word = score_global, low word = status_code_global
;;   postfilter: i64, high word = nominating_mode_global, low word = status_code_global
;;   permit:     i64, high word = status_code_global, low word = timeout_global (ms)
;;               (the reverse of score's order)
;;   unreserve, postbind: trap (unreachable) when flag_global is 1.
;; It exports all 14 hooks, so every framework interface is implemented (mask FSRPB).
(module $codes_from_globals
  (memory (export "memory") 1)
  (global $code (export "status_code_global") (mut i32) (i32.const 0))
  (global $score (export "score_global") (mut i32) (i32.const 0))
  (global $mode (export "nominating_mode_global") (mut i32) (i32.const 0))
  (global $timeout (export "timeout_global") (mut i32) (i32.const 0))
  (global $flag (export "flag_global") (mut i32) (i32.const 0))
  ;; (hi << 32) | lo, both halves as unsigned 32-bit words.
  (func $pack (param $hi i32) (param $lo i32) (result i64)
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $hi)) (i64.const 32))
      (i64.extend_i32_u (local.get $lo))))
  (func (export "enqueue"))
  (func (export "prefilter") (result i32) (global.get $code))
  (func (export "filter") (result i32) (global.get $code))
  (func (export "postfilter") (result i64) (call $pack (global.get $mode) (global.get $code)))
  (func (export "addpod") (result i32) (global.get $code))
  (func (export "removepod") (result i32) (global.get $code))
  (func (export "prescore") (result i32) (global.get $code))
  (func (export "score") (result i64) (call $pack (global.get $score) (global.get $code)))
  (func (export "normalizescore") (result i32) (global.get $code))
  (func (export "reserve") (result i32) (global.get $code))
  (func (export "unreserve") (if (global.get $flag) (then unreachable)))
  (func (export "permit") (result i64) (call $pack (global.get $code) (global.get $timeout)))
  (func (export "prebind") (result i32) (global.get $code))
  (func (export "bind") (result i32) (global.get $code))
  (func (export "postbind") (if (global.get $flag) (then unreachable)))
)
