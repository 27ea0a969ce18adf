;; A hostile sharing-affinity:plugin component (the core module; host/tests/guest_limits.rs embeds
;; the world from wit/ and encodes it as a component). `prefilter`, `filter` and `score` pick a
;; behaviour from the first byte of their argument (the pod or node name):
;;   l  loop forever                         -> the time limit
;;   g  grow memory 16 pages at a time       -> the memory limit
;;   r  recurse without end                  -> the wasm stack limit
;;   h  a status reason of 1 GiB (beyond memory; also beyond the reason limit)
;;   b  a status reason of 64 KiB inside memory (beyond the default 16 KiB reason limit)
;;   x  a garbage return-area pointer (0xfffffff0)
;;   y  a status reason with a garbage pointer and length (0xffff0000, 0x7fffffff)
;;   anything else: success (score 50) with an empty reason.
;; configure succeeds, update rejects nothing, reserve and bind return no allocation, unreserve
;; succeeds, set-time is ignored, postfilter deallocates nothing. binding-poll answers `ready`,
;; except for a pod whose name starts with `w`: `wait(600)` every time, however long the host
;; waited; unbind returns no claim. Strings the host passes in are
;; allocated by a bump allocator above 64 KiB.
;; The `nodes` interface does the same by node index: a name's index is the address of an 8-byte
;; cell holding it (pointer, length); `filter` and `score` act on that name, answer `error` when the
;; act left a reason (or a garbage area), and `last-reason` returns what the act wrote; `scores`
;; acts on each node of its list.
(module $hostile_component
  (memory (export "memory") 2)
  ;; the return area of the last `nodes` act (its status at +0: code, reason pointer, length)
  (global $last (mut i32) (i32.const 48))
  (global $heap (mut i32) (i32.const 65536))

  (func $cabi_realloc (export "cabi_realloc") (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
    (local $ptr i32)
    ;; Align the bump pointer, grow memory when needed, and copy a reallocated block.
    (local.set $ptr
      (i32.and
        (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $ptr) (local.get $size)))
    (block $fits
      (br_if $fits (i32.le_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536))))
      (if (i32.eq
            (memory.grow
              (i32.add (i32.shr_u (i32.sub (global.get $heap) (i32.mul (memory.size) (i32.const 65536))) (i32.const 16)) (i32.const 1)))
            (i32.const -1))
        (then unreachable)))
    (if (local.get $old)
      (then (memory.copy (local.get $ptr) (local.get $old) (local.get $old_size))))
    (local.get $ptr))

  (func $recurse (param $depth i32) (result i32)
    (i32.add (call $recurse (i32.add (local.get $depth) (i32.const 1))) (i32.const 1)))

  ;; Runs the hostile behaviour the name asks for; returns the return-area pointer of a status
  ;; written at $area + $offset (code byte, reason pointer, reason length), or a garbage pointer.
  (func $act (param $name i32) (param $len i32) (param $area i32) (param $offset i32) (result i32)
    (local $c i32)
    (local.set $c (if (result i32) (local.get $len)
      (then (i32.load8_u (local.get $name)))
      (else (i32.const 0))))
    ;; l: loop forever
    (if (i32.eq (local.get $c) (i32.const 108))
      (then (loop $forever (br $forever))))
    ;; g: grow until the host stops it (a failed grow would trap here too)
    (if (i32.eq (local.get $c) (i32.const 103))
      (then (loop $more
        (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
        unreachable))
    ;; r: recurse
    (if (i32.eq (local.get $c) (i32.const 114))
      (then (drop (call $recurse (i32.const 0)))))
    ;; x: garbage return-area pointer
    (if (i32.eq (local.get $c) (i32.const 120))
      (then (return (i32.const 0xfffffff0))))
    (i32.store8 (i32.add (local.get $area) (local.get $offset)) (i32.const 0))
    (i32.store (i32.add (local.get $area) (i32.add (local.get $offset) (i32.const 4))) (i32.const 0))
    (i32.store (i32.add (local.get $area) (i32.add (local.get $offset) (i32.const 8))) (i32.const 0))
    ;; h: a 1 GiB reason
    (if (i32.eq (local.get $c) (i32.const 104))
      (then (i32.store (i32.add (local.get $area) (i32.add (local.get $offset) (i32.const 8))) (i32.const 0x40000000))))
    ;; b: a 64 KiB reason of NUL bytes (valid UTF-8) at address 0
    (if (i32.eq (local.get $c) (i32.const 98))
      (then (i32.store (i32.add (local.get $area) (i32.add (local.get $offset) (i32.const 8))) (i32.const 65536))))
    ;; y: garbage pointer and length
    (if (i32.eq (local.get $c) (i32.const 121))
      (then
        (i32.store (i32.add (local.get $area) (i32.add (local.get $offset) (i32.const 4))) (i32.const 0xffff0000))
        (i32.store (i32.add (local.get $area) (i32.add (local.get $offset) (i32.const 8))) (i32.const 0x7fffffff))))
    (local.get $area))

  ;; configure: func(config: string) -> result<_, string>: ok
  (func (export "configure") (param i32 i32) (result i32)
    (i32.store8 (i32.const 16) (i32.const 0))
    (i32.const 16))
  ;; update: func(events: list<event>) -> list<event-error>: empty
  (func (export "update") (param i32 i32) (result i32)
    (i64.store (i32.const 16) (i64.const 0))
    (i32.const 16))
  ;; prefilter / filter: func(string) -> status
  (func (export "prefilter") (param i32 i32) (result i32)
    (call $act (local.get 0) (local.get 1) (i32.const 16) (i32.const 0)))
  (func (export "filter") (param i32 i32) (result i32)
    (call $act (local.get 0) (local.get 1) (i32.const 16) (i32.const 0)))
  ;; prescore: func(nodes: list<string>) -> status: success
  (func (export "prescore") (param i32 i32) (result i32)
    (i32.store8 (i32.const 16) (i32.const 0))
    (i32.store (i32.const 20) (i32.const 0))
    (i32.store (i32.const 24) (i32.const 0))
    (i32.const 16))
  ;; score: func(node: string) -> result<u32, status>: ok(50) unless the name asks for a status
  (func (export "score") (param i32 i32) (result i32)
    (local $area i32)
    (local.set $area (call $act (local.get 0) (local.get 1) (i32.const 32) (i32.const 4)))
    (if (i32.ne (local.get $area) (i32.const 32)) (then (return (local.get $area))))
    (if (i32.and (i32.eqz (i32.load (i32.const 44))) (i32.eqz (i32.load (i32.const 40))))
      (then
        (i32.store8 (i32.const 32) (i32.const 0))
        (i32.store (i32.const 36) (i32.const 50)))
      (else (i32.store8 (i32.const 32) (i32.const 1))))
    (i32.const 32))
  ;; nodes.index: func(name: string) -> u32: a new (pointer, length) cell from the bump allocator
  (func (export "sharing-affinity:plugin/nodes@0.1.0#index") (param $ptr i32) (param $len i32) (result i32)
    (local $cell i32)
    (local.set $cell (call $cabi_realloc (i32.const 0) (i32.const 0) (i32.const 4) (i32.const 8)))
    (i32.store (local.get $cell) (local.get $ptr))
    (i32.store (i32.add (local.get $cell) (i32.const 4)) (local.get $len))
    (local.get $cell))
  ;; nodes.forget: func(): the cells stay (a bump allocator frees nothing)
  (func (export "sharing-affinity:plugin/nodes@0.1.0#forget"))
  ;; acts on the handle's name; the code is `error` (1) when a reason was left or the area is garbage
  (func $node_act (param $rep i32) (result i32)
    (global.set $last
      (call $act (i32.load (local.get $rep)) (i32.load (i32.add (local.get $rep) (i32.const 4))) (i32.const 48) (i32.const 0)))
    (if (result i32) (i32.ne (global.get $last) (i32.const 48))
      (then (i32.const 1))
      (else (i32.ne (i32.or (i32.load (i32.const 52)) (i32.load (i32.const 56))) (i32.const 0)))))
  ;; nodes.filter: func(node: u32) -> code
  (func (export "sharing-affinity:plugin/nodes@0.1.0#filter") (param $rep i32) (result i32)
    (call $node_act (local.get $rep)))
  ;; nodes.score: func(node: u32) -> result<u32, code>: ok(50) or err(error)
  (func (export "sharing-affinity:plugin/nodes@0.1.0#score") (param $rep i32) (result i32)
    (if (call $node_act (local.get $rep))
      (then
        (i32.store8 (i32.const 64) (i32.const 1))
        (i32.store8 (i32.const 68) (i32.const 1)))
      (else
        (i32.store8 (i32.const 64) (i32.const 0))
        (i32.store (i32.const 68) (i32.const 50))))
    (i32.const 64))
  ;; nodes.scores: func(nodes: list<u32>) -> result<list<u32>, code>: acts on each node in turn;
  ;; err(error) at the first act that fails, else ok with a score of 50 per node
  (func (export "sharing-affinity:plugin/nodes@0.1.0#scores") (param $ptr i32) (param $len i32) (result i32)
    (local $i i32)
    (local $out i32)
    (local.set $out (call $cabi_realloc (i32.const 0) (i32.const 0) (i32.const 4) (i32.shl (local.get $len) (i32.const 2))))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (if (call $node_act (i32.load (i32.add (local.get $ptr) (i32.shl (local.get $i) (i32.const 2)))))
          (then
            (i32.store8 (i32.const 80) (i32.const 1))
            (i32.store8 (i32.const 84) (i32.const 1))
            (return (i32.const 80))))
        (i32.store (i32.add (local.get $out) (i32.shl (local.get $i) (i32.const 2))) (i32.const 50))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (i32.store8 (i32.const 80) (i32.const 0))
    (i32.store (i32.const 84) (local.get $out))
    (i32.store (i32.const 88) (local.get $len))
    (i32.const 80))
  ;; nodes.last-reason: func() -> string: the reason (pointer, length) the last act wrote
  (func (export "sharing-affinity:plugin/nodes@0.1.0#last-reason") (result i32)
    (i32.add (global.get $last) (i32.const 4)))
  ;; reserve: func(node: string) -> result<list<claim-allocation>, status>: ok([])
  (func (export "reserve") (param i32 i32) (result i32)
    (i32.store8 (i32.const 16) (i32.const 0))
    (i64.store (i32.const 20) (i64.const 0))
    (i32.const 16))
  ;; unreserve: func(pod: string, node: string) -> result<_, status>: ok
  (func (export "unreserve") (param i32 i32 i32 i32) (result i32)
    (i32.store8 (i32.const 16) (i32.const 0))
    (i32.const 16))
  ;; set-time: func(unix-seconds: s64): ignored
  (func (export "set-time") (param i64))
  ;; postfilter: func(pod: string) -> tuple<status, option<deallocation>>: (unschedulable, "",
  ;; none), written at 96 (code, reason pointer and length, then the option's tag at 108)
  (func (export "postfilter") (param i32 i32) (result i32)
    (i32.store8 (i32.const 96) (i32.const 2))
    (i64.store (i32.const 100) (i64.const 0))
    (i32.store8 (i32.const 108) (i32.const 0))
    (i32.const 96))
  ;; binding-poll: func(pod: string, polls: u32) -> binding-poll: ready, or wait(600) for `w...`,
  ;; written at 128 (tag at +0, the wait's seconds at +4)
  (func (export "binding-poll") (param $ptr i32) (param $len i32) (param $polls i32) (result i32)
    (if (i32.and (i32.gt_u (local.get $len) (i32.const 0))
                 (i32.eq (i32.load8_u (local.get $ptr)) (i32.const 119)))
      (then
        (i32.store8 (i32.const 128) (i32.const 1))
        (i32.store (i32.const 132) (i32.const 600)))
      (else (i32.store8 (i32.const 128) (i32.const 0))))
    (i32.const 128))
  ;; unbind: func(pod: string) -> list<string>: [] (pointer and length at 144)
  (func (export "unbind") (param i32 i32) (result i32)
    (i64.store (i32.const 144) (i64.const 0))
    (i32.const 144))
  ;; bind: func(pod: string, node: string) -> result<list<claim-allocation>, status>: ok([])
  (func (export "bind") (param i32 i32 i32 i32) (result i32)
    (i32.store8 (i32.const 16) (i32.const 0))
    (i64.store (i32.const 20) (i64.const 0))
    (i32.const 16))
)
