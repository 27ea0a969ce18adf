;; Imports a function that k8s.io/scheduler does not have:
;;   failed to create a guest pool: wasm: instantiate error: "currentNode" is not exported in module "k8s.io/scheduler"
(module $import_unknown_function
  (import "k8s.io/scheduler" "currentNode" (func (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "filter") (result i32) (i32.const 0))
)
