;; The buf_limit protocol (kswe-abi.md §1.1): the guest first offers a 4-byte buffer; when the
;; value is longer the host writes nothing and returns the needed length, and the guest retries with
;; a buffer of that length.
;;   prefilter: reads `get_config` this way; traps if the host wrote into the 4-byte buffer although
;;              the value did not fit (it is pre-filled with "XXXX"); sets the status reason to the
;;              config it finally read and returns the length the host reported.
;;   filter:    the same for `currentPod` (protobuf bytes), echoed as the reason.
;;   score:     the same for `currentNodeName`; returns (hi = length, lo = 0).
;; An empty value returns 0 on the first call and the reason stays empty.
(module $buffer_retry
  (import "k8s.io/scheduler" "get_config" (func $get_config (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "currentPod" (func $current_pod (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "currentNodeName" (func $current_node_name (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "result.status_reason" (func $status_reason (param i32 i32)))
  (memory (export "memory") 2)
  ;; $read(getter) -> length; the value ends up at 2048 (or at 1024 if it fit in 4 bytes).
  (func $read (param $getter i32) (result i32)
    (local $n i32)
    (i32.store (i32.const 1024) (i32.const 0x58585858)) ;; "XXXX"
    (local.set $n (call $dispatch (local.get $getter) (i32.const 1024) (i32.const 4)))
    (if (i32.le_u (local.get $n) (i32.const 4))
      (then
        (call $status_reason (i32.const 1024) (local.get $n))
        (return (local.get $n))))
    ;; Too long: nothing may have been written.
    (if (i32.ne (i32.load (i32.const 1024)) (i32.const 0x58585858)) (then unreachable))
    ;; Retry with exactly the needed length; the host must now return the same length.
    (if (i32.ne (call $dispatch (local.get $getter) (i32.const 2048) (local.get $n)) (local.get $n))
      (then unreachable))
    (call $status_reason (i32.const 2048) (local.get $n))
    (local.get $n))
  (func $dispatch (param $getter i32) (param $buf i32) (param $limit i32) (result i32)
    (if (result i32) (i32.eqz (local.get $getter))
      (then (call $get_config (local.get $buf) (local.get $limit)))
      (else
        (if (result i32) (i32.eq (local.get $getter) (i32.const 1))
          (then (call $current_pod (local.get $buf) (local.get $limit)))
          (else (call $current_node_name (local.get $buf) (local.get $limit)))))))
  (func (export "prefilter") (result i32) (call $read (i32.const 0)))
  (func (export "filter") (result i32) (call $read (i32.const 1)))
  (func (export "score") (result i64)
    (i64.shl (i64.extend_i32_u (call $read (i32.const 2))) (i64.const 32)))
)
