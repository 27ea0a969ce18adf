;; Instance lifecycle (kswe-abi.md §2.4). Each instance counts its own calls in a global; every
;; hook with a status returns the count after its own call as the code (score and permit in their
;; high word), so the test can see which instance served a call:
;;   a fresh instance answers 1, the same instance 2, 3, ...
;; The host reports how many instances it created (each ran `_start` once). Exports filter, score,
;; permit and bind (mask FSPB) plus prefilter, prebind and postbind. The returned codes are these
;; counts, not meaningful statuses.
(module $lifecycle
  (memory (export "memory") 1)
  (global $calls (mut i32) (i32.const 0))
  (func $next (result i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (global.get $calls))
  (func (export "_start"))
  (func (export "prefilter") (result i32) (call $next))
  (func (export "filter") (result i32) (call $next))
  (func (export "score") (result i64) (i64.shl (i64.extend_i32_u (call $next)) (i64.const 32)))
  (func (export "permit") (result i64) (i64.shl (i64.extend_i32_u (call $next)) (i64.const 32)))
  (func (export "prebind") (result i32) (call $next))
  (func (export "bind") (result i32) (call $next))
  (func (export "postbind") (drop (call $next)))
)
