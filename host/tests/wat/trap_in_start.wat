;; `_start` writes "panic!" to stdout and traps. The host runs `_start` when it creates the first
;; instance at load, so loading fails with (upstream plugin_test.go "panic on _start"):
;;   failed to create a guest pool: wasm: instantiate error: panic!
;;   module[1] function[_start] failed: wasm error: unreachable
;;   wasm stack trace:
;;   	trap_in_start.$2()
;; ($2: the import is function 0 and filter function 1; _start has no name in the name section.)
(module $trap_in_start
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "\08\00\00\00\06\00\00\00panic!")
  (func (export "filter") (result i32) (i32.const 0))
  (func (export "_start")
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 16)))
    unreachable)
)
