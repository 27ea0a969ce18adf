;; Exports only `memory` (and a function with an unknown name). Loading fails with
;;   wasm: guest does not export any plugin functions
(module $no_plugin_functions
  (memory (export "memory") 1)
  (func (export "helper") (result i32) (i32.const 0))
)
