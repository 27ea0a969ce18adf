;; filter + prebind + bind without postbind (mask FB). PreBind takes the scheduling instance into
;; the binding pool for the pod; PostBind is not exported, so upstream returns before freeing it and
;; the instance leaks (kswe-abi.md §2.4): the next scheduling cycle needs a new instance.
(module $bind_without_postbind
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 0))
  (func (export "filter") (result i32) (i32.const 0))
  (func (export "prebind") (result i32) (i32.const 0))
  (func (export "bind") (result i32) (i32.const 0))
)
