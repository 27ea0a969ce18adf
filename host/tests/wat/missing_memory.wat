;; A plugin without a `memory` export. Loading fails right after compiling, before the exports are
;; checked:  wasm: guest doesn't export memory[memory]
(module $missing_memory
  (memory 1)
  (func (export "filter") (result i32) (i32.const 0))
)
