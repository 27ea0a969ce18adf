;; Imports currentPod with one parameter instead of (buf, buf_limit). wazero names both types by
;; its signature key (params "_" results):
;;   failed to create a guest pool: wasm: instantiate error: import func[k8s.io/scheduler.currentPod]: signature mismatch: i32_i32 != i32i32_i32
(module $import_wrong_signature
  (import "k8s.io/scheduler" "currentPod" (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "filter") (result i32) (i32.const 0))
)
