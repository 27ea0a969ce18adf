;; Imports from a module the host does not provide. Upstream (wazero) fails when it creates the
;; first instance:
;;   failed to create a guest pool: wasm: instantiate error: module[env] not instantiated
(module $import_unknown_module
  (import "env" "abort" (func))
  (memory (export "memory") 1)
  (func (export "filter") (result i32) (i32.const 0))
)
