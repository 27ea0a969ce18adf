;; filter + score + reserve/unreserve + prebind, but no bind: upstream's maskInterfaces keeps the
;; combination FSR and the Go plugin type it builds has no PreBind method, so the framework never
;; calls `prebind`. Loading succeeds; the mask reports bind = false.
(module $prebind_without_bind
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 0))
  (func (export "filter") (result i32) (i32.const 0))
  (func (export "score") (result i64) (i64.const 0))
  (func (export "reserve") (result i32) (i32.const 0))
  (func (export "unreserve"))
  (func (export "prebind") (result i32) (i32.const 0))
)
