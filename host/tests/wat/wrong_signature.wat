;; Template: the test replaces NAME with each known export and SIG with a signature different from
;; the one the host requires, then expects upstream's error, e.g.
;;   wasm: guest exports the wrong signature for func[score]. should be () -> (i64)
;; (addpod and removepod keep upstream's misleading text "should be () -> ()" although the check is
;; `() -> (i32)`).
(module $wrong_signature
  (memory (export "memory") 1)
  (func (export "NAME") SIG unreachable)
)
