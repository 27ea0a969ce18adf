;; reserve + permit (RP) is a combination maskInterfaces has no Go type for. Loading fails after the
;; first instance was created with
;;   wasm: filter, score, reserve, permit or bind must be exported
(module $unsupported_combination
  (memory (export "memory") 1)
  (func (export "reserve") (result i32) (i32.const 0))
  (func (export "unreserve"))
  (func (export "permit") (result i64) (i64.const 0))
)
