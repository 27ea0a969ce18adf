;; klog (kswe-abi.md §1.4) and the event recorder. `_start` logs "started" (klog is usable there).
;; prefilter logs, in order:
;;   log(0, "info via log")
;;   log(1, "warning via log")            severity 1 is never printed upstream
;;   log(2, "error via log")              upstream bug: `log` drops when severity > configured,
;;                                        so with the default configuration (0) errors are dropped
;;   logs(0, "info via logs", "k\0v\0")
;;   logs(2, "error via logs", "k\0\0v\0")   the empty entry is skipped: kvs ["k", "v"]
;;   logs(2, "error via logs without kvs", kvs_len 0)   delegates to `log` (and its bug)
;; and returns severity(). filter records an event through handle.eventrecorder.eventf;
;; score passes invalid JSON to eventf, which panics the Go host: a trap.
(module $klog_capture
  (import "k8s.io/klog" "log" (func $log (param i32 i32 i32)))
  (import "k8s.io/klog" "logs" (func $logs (param i32 i32 i32 i32 i32)))
  (import "k8s.io/klog" "severity" (func $severity (result i32)))
  (import "k8s.io/scheduler" "handle.eventrecorder.eventf" (func $eventf (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "info via log")
  (data (i32.const 16) "warning via log")
  (data (i32.const 32) "error via log")
  (data (i32.const 48) "info via logs")
  (data (i32.const 64) "error via logs")
  (data (i32.const 80) "error via logs without kvs")
  (data (i32.const 112) "k\00v\00")
  (data (i32.const 120) "k\00\00v\00")
  (data (i32.const 128) "started")
  (data (i32.const 256) "{\"RegardingReference\":{\"Kind\":\"Pod\",\"Name\":\"p\",\"Namespace\":\"ns\"},\"Eventtype\":\"Normal\",\"Reason\":\"Scheduled\",\"Action\":\"Binding\",\"Note\":\"ok\"}")
  (data (i32.const 512) "{not json")
  (func (export "_start") (call $log (i32.const 0) (i32.const 128) (i32.const 7)))
  (func (export "prefilter") (result i32)
    (call $log (i32.const 0) (i32.const 0) (i32.const 12))
    (call $log (i32.const 1) (i32.const 16) (i32.const 15))
    (call $log (i32.const 2) (i32.const 32) (i32.const 13))
    (call $logs (i32.const 0) (i32.const 48) (i32.const 13) (i32.const 112) (i32.const 4))
    (call $logs (i32.const 2) (i32.const 64) (i32.const 14) (i32.const 120) (i32.const 5))
    (call $logs (i32.const 2) (i32.const 80) (i32.const 26) (i32.const 0) (i32.const 0))
    (call $severity))
  (func (export "filter") (result i32)
    (call $eventf (i32.const 256) (i32.const 138))
    (i32.const 0))
  (func (export "score") (result i64)
    (call $eventf (i32.const 512) (i32.const 9))
    (i64.const 0))
)
