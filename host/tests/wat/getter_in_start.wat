;; `_start` calls `currentPod`, a per-call getter. No framework callback is running while the first
;; instance starts, so the Go host's type assertion panics (kswe-abi.md §1.1) and loading fails:
;;   failed to create a guest pool: wasm: instantiate error: module[1] function[_start] failed:
;;   interface conversion: interface {} is nil, not *wasm.stack (recovered by wazero)
;;   wasm stack trace:
;;   	k8s.io/scheduler.currentPod(i32,i32) i32
;;   	getter_in_start.start()
;; `get_config` is allowed in `_start`: it is called first and does not fail.
(module $getter_in_start
  (import "k8s.io/scheduler" "get_config" (func $get_config (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "currentPod" (func $current_pod (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "filter") (result i32) (i32.const 0))
  (func $start (export "_start")
    (drop (call $get_config (i32.const 0) (i32.const 64)))
    (drop (call $current_pod (i32.const 0) (i32.const 64))))
)
