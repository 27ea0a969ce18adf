;; A hostile KSWE guest (host/tests/guest_limits.rs). `filter` and `score` read the node name with
;; currentNodeName and pick a behaviour from its first byte:
;;   l  loop forever                                   -> the time limit
;;   g  grow memory 16 pages at a time                 -> the memory limit
;;   r  recurse without end                            -> the wasm stack limit
;;   h  result.status_reason(0, 1 GiB), return 0       -> the status reason limit
;;   b  result.status_reason(0, 64 KiB), return 0      -> the status reason limit (inside memory)
;;   x  result.status_reason(0xfffffff0, 100), return 0 -> a reason outside memory: an Error status
;;   p  currentPod(0xffffff00, 0x7fffffff)             -> the host cannot write there: a trap
;;   o  write 64 KiB to stdout 32 times, then trap     -> the captured output is cut at 64 KiB
;;   k  log 20,000 klog records, return 0              -> the host keeps 10,000
;;   anything else: success (score 50).
;; prefilter always succeeds.
(module $hostile_kswe
  (import "k8s.io/scheduler" "currentNodeName" (func $current_node_name (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "currentPod" (func $current_pod (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $status_reason (param i32 i32)))
  (import "k8s.io/klog" "log" (func $log (param i32 i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)

  (func $recurse (param $depth i32) (result i32)
    (i32.add (call $recurse (i32.add (local.get $depth) (i32.const 1))) (i32.const 1)))

  ;; The hostile behaviour for the current node; returns the status code for a normal return.
  (func $act (result i32)
    (local $c i32) (local $i i32)
    (local.set $c
      (if (result i32) (call $current_node_name (i32.const 256) (i32.const 64))
        (then (i32.load8_u (i32.const 256)))
        (else (i32.const 0))))
    (if (i32.eq (local.get $c) (i32.const 108))
      (then (loop $forever (br $forever))))
    (if (i32.eq (local.get $c) (i32.const 103))
      (then (loop $more
        (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
        unreachable))
    (if (i32.eq (local.get $c) (i32.const 114))
      (then (drop (call $recurse (i32.const 0)))))
    (if (i32.eq (local.get $c) (i32.const 104))
      (then (call $status_reason (i32.const 0) (i32.const 0x40000000))))
    (if (i32.eq (local.get $c) (i32.const 98))
      (then (call $status_reason (i32.const 0) (i32.const 65536))))
    (if (i32.eq (local.get $c) (i32.const 120))
      (then (call $status_reason (i32.const 0xfffffff0) (i32.const 100))))
    (if (i32.eq (local.get $c) (i32.const 112))
      (then (drop (call $current_pod (i32.const 0xffffff00) (i32.const 0x7fffffff)))))
    (if (i32.eq (local.get $c) (i32.const 111))
      (then
        ;; One iovec at 0: {ptr = 1024, len = 65536}.
        (i32.store (i32.const 0) (i32.const 1024))
        (i32.store (i32.const 4) (i32.const 65536))
        (loop $write
          (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $write (i32.lt_u (local.get $i) (i32.const 32))))
        unreachable))
    (if (i32.eq (local.get $c) (i32.const 107))
      (then
        (loop $log
          (call $log (i32.const 0) (i32.const 256) (i32.const 3))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $log (i32.lt_u (local.get $i) (i32.const 20000))))))
    (i32.const 0))

  (func $prefilter (export "prefilter") (result i32) (i32.const 0))
  (func $filter (export "filter") (result i32) (call $act))
  (func $score (export "score") (result i64)
    (i64.or (i64.shl (i64.const 50) (i64.const 32)) (i64.extend_i32_u (call $act))))
)
