;; WASI proc_exit (kswe-abi.md §2.2). `_start` reads argc and, when there are arguments, calls
;; proc_exit(argc - 1):
;;   args ["x"]:      proc_exit(0) in _start: wazero does not report an error but closes the
;;                    instance; every later call fails with "module closed with exit_code(0)".
;;   args ["x", "y"]: proc_exit(1) in _start: loading fails with
;;                    "failed to create a guest pool: wasm: instantiate error: module closed with exit_code(1)".
;;   no args:         filter calls proc_exit(7); that call and every later one fail with
;;                    "wasm: filter error: module closed with exit_code(7)".
(module $exit
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (drop (call $args_sizes_get (i32.const 0) (i32.const 4)))
    (if (i32.load (i32.const 0))
      (then (call $proc_exit (i32.sub (i32.load (i32.const 0)) (i32.const 1))))))
  (func (export "filter") (result i32) (call $proc_exit (i32.const 7)) (i32.const 0))
)
