;; A KSWE image-locality guest (our own, for tests): `score` rates a node by the container images of
;; the pod that the node already has, with the rule of kube-scheduler's ImageLocality plugin:
;;   for each container and init container image (normalised: ":latest" appended when the name has
;;   no tag after its last "/"), if the node's ImageStates has it:
;;       sum += Size * NumNodes / totalNodes
;;   sum is clamped to [23 MiB, 1000 MiB * containers], and score = 100 * (sum - min) / (max - min).
;; It reads the pod (`currentPod`, protobuf: PodSpec.containers = 2, initContainers = 20,
;; Container.image = 2), the node's image states (`nodeImageStates`, JSON) and the node count
;; (`nodeList`, NodeList.items = 2). Fixed buffers: a value that does not fit traps.
(module
  (import "k8s.io/scheduler" "currentPod" (func $current_pod (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "currentNodeName" (func $current_node_name (param i32 i32) (result i32)))
  (import "k8s.io/scheduler" "nodeImageStates" (func $node_image_states (param i32 i32 i32 i32) (result i32)))
  (import "k8s.io/api" "nodeList" (func $node_list (param i32 i32) (result i32)))
  (memory (export "memory") 2)

  ;; Layout: 0 needle (1 KiB), 1024 node name (1 KiB), 2048 pod (16 KiB),
  ;; 18432 image states (32 KiB), 51200 node list (64 KiB).
  (global $pos (mut i32) (i32.const 0))
  (global $sum (mut i64) (i64.const 0))
  (global $containers (mut i64) (i64.const 0))
  (global $total (mut i64) (i64.const 0))
  (global $json_len (mut i32) (i32.const 0))

  ;; Reads a varint at $pos and advances $pos.
  (func $varint (result i64)
    (local $result i64) (local $shift i64) (local $b i32)
    (loop $more
      (local.set $b (i32.load8_u (global.get $pos)))
      (global.set $pos (i32.add (global.get $pos) (i32.const 1)))
      (local.set $result
        (i64.or (local.get $result)
          (i64.shl (i64.extend_i32_u (i32.and (local.get $b) (i32.const 0x7f))) (local.get $shift))))
      (local.set $shift (i64.add (local.get $shift) (i64.const 7)))
      (br_if $more (i32.and (local.get $b) (i32.const 0x80))))
    (local.get $result))

  ;; Skips a field's value of wire type $wt at $pos (for wire type 2, $len was already read).
  (func $skip (param $wt i32) (param $len i32)
    (if (i32.eqz (local.get $wt)) (then (drop (call $varint)) (return)))
    (if (i32.eq (local.get $wt) (i32.const 1))
      (then (global.set $pos (i32.add (global.get $pos) (i32.const 8))) (return)))
    (if (i32.eq (local.get $wt) (i32.const 2))
      (then (global.set $pos (i32.add (global.get $pos) (local.get $len))) (return)))
    (if (i32.eq (local.get $wt) (i32.const 5))
      (then (global.set $pos (i32.add (global.get $pos) (i32.const 4))) (return)))
    unreachable)

  ;; Index of the needle (at 0, $n bytes) in the JSON from $from, or -1.
  (func $find (param $from i32) (param $n i32) (result i32)
    (local $i i32) (local $j i32)
    (local.set $i (local.get $from))
    (block $none
      (loop $scan
        (br_if $none (i32.gt_s (i32.add (local.get $i) (local.get $n)) (global.get $json_len)))
        (local.set $j (i32.const 0))
        (block $mismatch
          (loop $cmp
            (br_if $mismatch
              (i32.ne (i32.load8_u (i32.add (i32.const 18432) (i32.add (local.get $i) (local.get $j))))
                      (i32.load8_u (local.get $j))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br_if $cmp (i32.lt_s (local.get $j) (local.get $n))))
          (return (local.get $i)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (i32.const -1))

  ;; The decimal integer at JSON offset $at.
  (func $int_at (param $at i32) (result i64)
    (local $v i64) (local $c i32)
    (block $end
      (loop $digits
        (local.set $c (i32.load8_u (i32.add (i32.const 18432) (local.get $at))))
        (br_if $end (i32.or (i32.lt_u (local.get $c) (i32.const 48)) (i32.gt_u (local.get $c) (i32.const 57))))
        (local.set $v (i64.add (i64.mul (local.get $v) (i64.const 10)) (i64.extend_i32_u (i32.sub (local.get $c) (i32.const 48)))))
        (local.set $at (i32.add (local.get $at) (i32.const 1)))
        (br $digits)))
    (local.get $v))

  ;; Writes the bytes of a string constant (in data, at $src, $n bytes) to the needle at $at.
  (func $put (param $at i32) (param $src i32) (param $n i32) (result i32)
    (memory.copy (local.get $at) (local.get $src) (local.get $n))
    (i32.add (local.get $at) (local.get $n)))

  ;; Adds one container image (at $ptr, $len bytes) to the sum.
  (func $image (param $ptr i32) (param $len i32)
    (local $i i32) (local $colon i32) (local $slash i32) (local $n i32) (local $at i32)
    (local $size i64) (local $nodes i64) (local $c i32)
    (global.set $containers (i64.add (global.get $containers) (i64.const 1)))
    (local.set $colon (i32.const -1))
    (local.set $slash (i32.const -1))
    (block $done
      (loop $chars
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $c (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
        (if (i32.eq (local.get $c) (i32.const 58)) (then (local.set $colon (local.get $i))))
        (if (i32.eq (local.get $c) (i32.const 47)) (then (local.set $slash (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $chars)))
    ;; needle = "<image>[:latest]":{"Size":
    (i32.store8 (i32.const 0) (i32.const 34))
    (memory.copy (i32.const 1) (local.get $ptr) (local.get $len))
    (local.set $n (i32.add (local.get $len) (i32.const 1)))
    (if (i32.le_s (local.get $colon) (local.get $slash))
      (then (local.set $n (call $put (local.get $n) (i32.const 116736) (i32.const 7)))))
    (local.set $n (call $put (local.get $n) (i32.const 116752) (i32.const 10)))
    (local.set $at (call $find (i32.const 0) (local.get $n)))
    (if (i32.lt_s (local.get $at) (i32.const 0)) (then (return)))
    (local.set $at (i32.add (local.get $at) (local.get $n)))
    (local.set $size (call $int_at (local.get $at)))
    ;; then ,"NumNodes":
    (drop (call $put (i32.const 0) (i32.const 116768) (i32.const 12)))
    (local.set $at (call $find (local.get $at) (i32.const 12)))
    (if (i32.lt_s (local.get $at) (i32.const 0)) (then unreachable))
    (local.set $nodes (call $int_at (i32.add (local.get $at) (i32.const 12))))
    (global.set $sum
      (i64.add (global.get $sum)
        (i64.div_s (i64.mul (local.get $size) (local.get $nodes)) (global.get $total)))))

  ;; Walks a Container message in [$pos, $end): field 2 is the image.
  (func $container (param $end i32)
    (local $tag i64) (local $len i32)
    (block $done
      (loop $fields
        (br_if $done (i32.ge_u (global.get $pos) (local.get $end)))
        (local.set $tag (call $varint))
        (local.set $len (i32.const 0))
        (if (i64.eq (i64.and (local.get $tag) (i64.const 7)) (i64.const 2))
          (then (local.set $len (i32.wrap_i64 (call $varint)))))
        (if (i64.eq (local.get $tag) (i64.const 0x12))
          (then (call $image (global.get $pos) (local.get $len))))
        (call $skip (i32.wrap_i64 (i64.and (local.get $tag) (i64.const 7))) (local.get $len))
        (br $fields))))

  ;; Walks a message in [$pos, $end); for each length-delimited field $want (or $also) calls
  ;; $container on it (PodSpec) or descends into it (Pod.spec, when $want = 2 and $also = 0).
  (func $walk (param $end i32) (param $want i64) (param $also i64) (param $depth i32)
    (local $tag i64) (local $len i32) (local $field i64) (local $start i32)
    (block $done
      (loop $fields
        (br_if $done (i32.ge_u (global.get $pos) (local.get $end)))
        (local.set $tag (call $varint))
        (local.set $field (i64.shr_u (local.get $tag) (i64.const 3)))
        (local.set $len (i32.const 0))
        (if (i64.eq (i64.and (local.get $tag) (i64.const 7)) (i64.const 2))
          (then (local.set $len (i32.wrap_i64 (call $varint)))))
        (local.set $start (global.get $pos))
        (if (i32.and
              (i64.eq (i64.and (local.get $tag) (i64.const 7)) (i64.const 2))
              (i32.or (i64.eq (local.get $field) (local.get $want)) (i64.eq (local.get $field) (local.get $also))))
          (then
            (if (i32.eqz (local.get $depth))
              (then (call $walk (i32.add (local.get $start) (local.get $len)) (i64.const 2) (i64.const 20) (i32.const 1)))
              (else (call $container (i32.add (local.get $start) (local.get $len)))))
            (global.set $pos (local.get $start))))
        (call $skip (i32.wrap_i64 (i64.and (local.get $tag) (i64.const 7))) (local.get $len))
        (br $fields))))

  ;; The number of nodes: NodeList.items (field 2) at top level.
  (func $count_nodes (param $end i32)
    (local $tag i64) (local $len i32)
    (block $done
      (loop $fields
        (br_if $done (i32.ge_u (global.get $pos) (local.get $end)))
        (local.set $tag (call $varint))
        (local.set $len (i32.const 0))
        (if (i64.eq (i64.and (local.get $tag) (i64.const 7)) (i64.const 2))
          (then (local.set $len (i32.wrap_i64 (call $varint)))))
        (if (i64.eq (local.get $tag) (i64.const 0x12))
          (then (global.set $total (i64.add (global.get $total) (i64.const 1)))))
        (call $skip (i32.wrap_i64 (i64.and (local.get $tag) (i64.const 7))) (local.get $len))
        (br $fields))))

  (func (export "score") (result i64)
    (local $n i32) (local $min i64) (local $max i64) (local $sum i64)
    (global.set $sum (i64.const 0))
    (global.set $containers (i64.const 0))
    (global.set $total (i64.const 0))
    ;; Nodes in the cluster.
    (local.set $n (call $node_list (i32.const 51200) (i32.const 65536)))
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then unreachable))
    (global.set $pos (i32.const 51200))
    (call $count_nodes (i32.add (i32.const 51200) (local.get $n)))
    ;; The node's image states.
    (local.set $n (call $current_node_name (i32.const 1024) (i32.const 1024)))
    (if (i32.gt_u (local.get $n) (i32.const 1024)) (then unreachable))
    (global.set $json_len (call $node_image_states (i32.const 1024) (local.get $n) (i32.const 18432) (i32.const 32768)))
    (if (i32.gt_u (global.get $json_len) (i32.const 32768)) (then unreachable))
    ;; The pod's containers.
    (local.set $n (call $current_pod (i32.const 2048) (i32.const 16384)))
    (if (i32.gt_u (local.get $n) (i32.const 16384)) (then unreachable))
    (global.set $pos (i32.const 2048))
    (call $walk (i32.add (i32.const 2048) (local.get $n)) (i64.const 2) (i64.const 2) (i32.const 0))
    ;; calculatePriority.
    (local.set $min (i64.const 24117248))
    (local.set $max (i64.mul (i64.const 1048576000) (global.get $containers)))
    (local.set $sum (global.get $sum))
    (if (i64.lt_s (local.get $sum) (local.get $min)) (then (local.set $sum (local.get $min))))
    (if (i64.gt_s (local.get $sum) (local.get $max)) (then (local.set $sum (local.get $max))))
    (if (i64.le_s (local.get $max) (local.get $min)) (then (return (i64.const 0))))
    ;; score in the high word, code 0 (Success) in the low word.
    (i64.shl
      (i64.div_s (i64.mul (i64.const 100) (i64.sub (local.get $sum) (local.get $min)))
                 (i64.sub (local.get $max) (local.get $min)))
      (i64.const 32)))

  (data (i32.const 116736) ":latest")
  (data (i32.const 116752) "\22:{\22Size\22:")
  (data (i32.const 116768) ",\22NumNodes\22:")
)
