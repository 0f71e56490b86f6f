// RUN: vt-opt %s --split-input-file --vt-eliminate-data-movement='report=-' -o %t.mlir 2>&1 | filecheck %s --check-prefix=DECISION
// RUN: filecheck %s --input-file=%t.mlir
// RUN: vt-opt %s --split-input-file --vt-eliminate-data-movement='report=%t.txt' | filecheck %s
// RUN: filecheck %s --check-prefix=FILE --input-file=%t.txt
// RUN: vt-opt %s --split-input-file --vt-eliminate-data-movement --vt-stats='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=STATS
// RUN: not vt-opt %s --split-input-file --vt-eliminate-data-movement='cost-model=guess' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: vt-opt %s --split-input-file --vt-eliminate-data-movement --vt-lower-views | filecheck %s --check-prefix=LOWER
// RUN: vt-opt %s --split-input-file --vt-eliminate-data-movement='report=- rewrite=false' 2>&1 | filecheck %s --check-prefix=CONFLICT
// RUN: vt-opt %s --split-input-file --vt-eliminate-data-movement='rewrite=false' | filecheck %s --check-prefix=IR
// RUN: vt-opt %s --split-input-file --vt-eliminate-data-movement='report=-' 2>&1 | filecheck %s --check-prefix=REWRITE
// RUN: vt-opt %s --split-input-file --vt-eliminate-data-movement='report=- memory-aware=false' -o /dev/null 2>&1 | filecheck %s --check-prefix=OFF
// RUN: vt-opt %s --split-input-file --vt-eliminate-data-movement='report=- target=cuda' -o /dev/null 2>&1 | filecheck %s --check-prefix=CUDA

// The `// -----` chunks are separate modules; the `<PREFIX>-LABEL: {{^}}// -----` lines keep each
// prefix's checks of the printed IR within the chunk they are written in.

// The composed mappings, as the printer aliases them.
// CHECK-DAG: #[[PERM:map[0-9]*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[RESHAPE:map[0-9]*]] = affine_map<(d0) -> (d0 mod 4, d0 floordiv 4)>
// CHECK-DAG: #[[SLICE:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1 + 32)>
// CHECK-DAG: #[[PIECE:map[0-9]*]] = affine_map<(d0, d1) -> (d0 + 1, d1)>
// CHECK-DAG: #[[BCAST:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d0, d2)>

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// Transpose: the result becomes a view of the input (incontiguous on the CPU: Type II, a penalty,
// still a saving with one reader).
// DECISION-LABEL: points-to @transpose: 1 virtual tensors, 1 edges, estimated saving 128 B
// DECISION-NEXT:  choose e0: %transposed -> %[[T:.*]] transpose output-of-input w=128 (saved 256, penalty 128, gather 0, unblocked 0) type II (none
// CHECK-LABEL: func.func @transpose
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[V:.*]] = "vt.view"(%[[A]]) {mapping = [{map = #[[PERM]], source = 0 : i64}]{{.*}} : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[V]] : tensor<8x4xf32>)
func.func @transpose(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %ea = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%ea : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %et = tensor.empty() : tensor<8x4xf32>
  %d = linalg.transpose ins(%a : tensor<4x8xf32>) outs(%et : tensor<8x4xf32>) permutation = [1, 0]
  %out = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%d : tensor<8x4xf32>) outs(%et : tensor<8x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<8x4xf32>
  return %out : tensor<8x4xf32>
}

// Reshape after a transpose: the reshape alone saves nothing (it is a zero-copy view already), but
// once the transpose is a view the reshape would force a gather of it (non-linalg reader); making
// the reshape a view too removes that ("unblocked"), and the two compose (F_outer ∘ F_base) into
// one view of the physical tensor with floordiv/mod.
// DECISION-LABEL: points-to @transpose_reshape: 2 virtual tensors, 2 edges
// DECISION:       choose e{{[0-9]+}}: %transposed -> {{.*}} transpose output-of-input
// DECISION:       choose e{{[0-9]+}}: %collapsed -> %transposed reshape output-of-input w={{[0-9]+}} (saved 0, penalty {{[0-9]+}}, gather 0, unblocked 256)
// CHECK-LABEL: func.func @transpose_reshape
// CHECK-NOT:     linalg.transpose
// CHECK-NOT:     tensor.collapse_shape
// CHECK:         %[[V:.*]] = "vt.view"(%{{.*}}) {mapping = [{map = #[[RESHAPE]], source = 0 : i64}]{{.*}} : (tensor<4x8xf32>) -> tensor<32xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[V]] : tensor<32xf32>)
func.func @transpose_reshape(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %ea = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%ea : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %et = tensor.empty() : tensor<8x4xf32>
  %d = linalg.transpose ins(%a : tensor<4x8xf32>) outs(%et : tensor<8x4xf32>) permutation = [1, 0]
  %c = tensor.collapse_shape %d [[0, 1]] : tensor<8x4xf32> into tensor<32xf32>
  %e1 = tensor.empty() : tensor<32xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%c : tensor<32xf32>) outs(%e1 : tensor<32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<32xf32>
  return %out : tensor<32xf32>
}

// A reshape of a physical tensor stays: it moves no bytes, so there is nothing to save.
// DECISION-LABEL: points-to @reshape_only: 0 virtual tensors, 0 edges, estimated saving 0 B
// CHECK-LABEL: func.func @reshape_only
// CHECK:         tensor.expand_shape
// CHECK-NOT:     vt.view
func.func @reshape_only(%x: tensor<32xf32>) -> tensor<4x8xf32> {
  %e1 = tensor.empty() : tensor<32xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<32xf32>) outs(%e1 : tensor<32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<32xf32>
  %r = tensor.expand_shape %a [[0, 1]] output_shape [4, 8] : tensor<32xf32> into tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %out = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %out : tensor<4x8xf32>
}

// Slice (split of a fused projection, VTC §4.4 Split): the K part is a view at column offset 32,
// Type I (one contiguous row of a 1-row tensor).
// DECISION-LABEL: points-to @slice: 1 virtual tensors, 1 edges, estimated saving 256 B
// DECISION-NEXT:  choose e0: %extracted_slice -> {{.*}} slice output-of-input w=256 (saved 256, penalty 0, gather 0, unblocked 0) type I
// CHECK-LABEL: func.func @slice
// CHECK-NOT:     tensor.extract_slice
// CHECK:         "vt.view"(%{{.*}}) {mapping = [{map = #[[SLICE]], source = 0 : i64}]{{.*}} : (tensor<1x96xf32>) -> tensor<1x32xf32>
func.func @slice(%x: tensor<1x96xf32>) -> tensor<1x32xf32> {
  %e = tensor.empty() : tensor<1x96xf32>
  %a = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<1x96xf32>) outs(%e : tensor<1x96xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<1x96xf32>
  %b = tensor.extract_slice %a[0, 32] [1, 32] [1, 1] : tensor<1x96xf32> to tensor<1x32xf32>
  %e2 = tensor.empty() : tensor<1x32xf32>
  %out = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<1x32xf32>) outs(%e2 : tensor<1x32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<1x32xf32>
  return %out : tensor<1x32xf32>
}

// Concat read by a slice of one piece: the concat becomes a two-piece view (its slice reader may
// become a view too, so it is not charged a gather), and the slice composes with it into a
// one-piece view of the second input only.
// DECISION-LABEL: points-to @concat_then_slice: 2 virtual tensors, 3 edges
// DECISION:       choose e{{[0-9]+}}: %concat -> {{.*}} concat output-of-input
// DECISION:       choose e{{[0-9]+}}: %concat -> {{.*}} concat output-of-input
// DECISION:       choose e{{[0-9]+}}: %extracted_slice -> %concat slice output-of-input
// CHECK-LABEL: func.func @concat_then_slice
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<2x8xf32>, %[[Y:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK-NOT:     tensor.concat
// CHECK-NOT:     tensor.extract_slice
// CHECK:         %[[B:.*]] = linalg.generic {{.*}} ins(%[[Y]]
// CHECK:         "vt.view"(%[[B]]) {mapping = [{map = #[[PIECE]], source = 0 : i64}]{{.*}} : (tensor<4x8xf32>) -> tensor<2x8xf32>
func.func @concat_then_slice(%x: tensor<2x8xf32>, %y: tensor<4x8xf32>) -> tensor<2x8xf32> {
  %ea = tensor.empty() : tensor<2x8xf32>
  %a = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%ea : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %eb = tensor.empty() : tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<4x8xf32>) outs(%eb : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.tanh %v : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %c = tensor.concat dim(0) %a, %b : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %s = tensor.extract_slice %c[3, 0] [2, 8] [1, 1] : tensor<6x8xf32> to tensor<2x8xf32>
  %out = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<2x8xf32>) outs(%ea : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %t = math.exp %v : f32
    linalg.yield %t : f32
  } -> tensor<2x8xf32>
  return %out : tensor<2x8xf32>
}

// Concat read by a compute op: a two-piece view (vt-lower-views splits the reader's loop range at
// the piece boundary, test/Transforms/vt-lower-views.mlir, SPLIT), both pieces Type I.
// DECISION-LABEL: points-to @concat_split: 1 virtual tensors, 2 edges
// DECISION-NEXT:  choose e0: %concat -> %{{.*}} concat output-of-input
// DECISION-NEXT:  choose e1: %concat -> %arg1 concat output-of-input
// CHECK-LABEL: func.func @concat_split
// CHECK-NOT:     tensor.concat
// CHECK:         "vt.view"(%{{.*}}, %{{.*}}) {mapping = [{dims = array<i64: 0>, hi = array<i64: 2>, lo = array<i64: 0>, map = #{{.*}}, source = 0 : i64}, {dims = array<i64: 0>, hi = array<i64: 6>, lo = array<i64: 2>, map = #{{.*}}, source = 1 : i64}]
func.func @concat_split(%x: tensor<2x8xf32>, %y: tensor<4x8xf32>) -> tensor<6x8xf32> {
  %ea = tensor.empty() : tensor<2x8xf32>
  %a = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%ea : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %c = tensor.concat dim(0) %a, %y : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %e = tensor.empty() : tensor<6x8xf32>
  %out = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<6x8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %t = math.exp %v : f32
    linalg.yield %t : f32
  } -> tensor<6x8xf32>
  return %out : tensor<6x8xf32>
}

// Broadcast (§4.4 Expand): the broadcast dim is dropped from the map.
// DECISION-LABEL: points-to @broadcast: 1 virtual tensors, 1 edges
// DECISION-NEXT:  choose e0: %broadcasted -> {{.*}} broadcast output-of-input
// CHECK-LABEL: func.func @broadcast
// CHECK-NOT:     linalg.broadcast
// CHECK:         "vt.view"(%{{.*}}) {mapping = [{map = #[[BCAST]], source = 0 : i64}]{{.*}} : (tensor<2x16xf32>) -> tensor<2x4x16xf32>
func.func @broadcast(%x: tensor<2x16xf32>) -> tensor<2x4x16xf32> {
  %e = tensor.empty() : tensor<2x16xf32>
  %a = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x16xf32>) outs(%e : tensor<2x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x16xf32>
  %eb = tensor.empty() : tensor<2x4x16xf32>
  %b = linalg.broadcast ins(%a : tensor<2x16xf32>) outs(%eb : tensor<2x4x16xf32>) dimensions = [1]
  %out = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%b : tensor<2x4x16xf32>) outs(%eb : tensor<2x4x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4x16xf32>
  return %out : tensor<2x4x16xf32>
}

// A data-movement result that is returned is a graph output: it stays physical (Alg. 1 line 10).
// DECISION-LABEL: points-to @returned: 0 virtual tensors
// CHECK-LABEL: func.func @returned
// CHECK:         linalg.transpose
func.func @returned(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %et = tensor.empty() : tensor<8x4xf32>
  %d = linalg.transpose ins(%x : tensor<4x8xf32>) outs(%et : tensor<8x4xf32>) permutation = [1, 0]
  return %d : tensor<8x4xf32>
}

// STATS: data-movement
// BAD: error: vt-eliminate-data-movement: unknown cost model 'guess'; expected one of analytic, measured

// -----
// CHECK-LABEL: {{^}}// -----
// LOWER-LABEL: {{^}}// -----
// IR-LABEL: {{^}}// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#red_in = affine_map<(d0, d1, d2) -> (d0, d2)>
#red_w = affine_map<(d0, d1, d2) -> (d2, d1)>
#red_out = affine_map<(d0, d1, d2) -> (d0, d1)>

// VTC §4.4 / Fig. 11 (C3K2): a split, a layer on one half, the halves and its output concatenated
// and reduced over by a matmul-like reader (which could only read a view by gathering it). Both
// producers write into the concat buffer; the half the layer reads is read back from the buffer
// through a view (the conflict: another reader of a stored element).
// DECISION-LABEL: points-to @c3k2_like:
// DECISION:       concat-store tensor.concat -> %{{.*}}: 2 producer(s) write into the concat buffer, 0 input(s) copied
// DECISION-NEXT:    %[[A:.*]] written by linalg.generic -> tensor.extract_slice, map (d0, d1) -> (d0, d1)
// DECISION-NEXT:    %{{.*}} written by linalg.generic, map (d0, d1) -> (d0, d1 + 8)
// DECISION-NEXT:    the concat buffer is needed: a linalg.generic reads the concat dim other than as a parallel loop
// CHECK-LABEL: func.func @c3k2_like
// CHECK-NOT:     tensor.concat
// CHECK:         %[[BUF:.*]] = tensor.empty() : tensor<2x12xf32>
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:           math.exp
// CHECK:         %[[S1:.*]] = "vt.store_into"(%[[A]], %[[BUF]])
// CHECK-NOT:     "vt.view"(%[[S1]]) {{.*}} -> tensor<2x8xf32>
// CHECK:         %[[HALF:.*]] = "vt.view"(%[[S1]]) {mapping = [{map = #{{.*}}, source = 0 : i64}]{{.*}} : (tensor<2x12xf32>) -> tensor<2x4xf32>
// CHECK:         %[[B:.*]] = linalg.generic {{.*}} ins(%[[HALF]] : tensor<2x4xf32>)
// CHECK:           arith.negf
// CHECK:         %[[S2:.*]] = "vt.store_into"(%[[B]], %[[S1]])
// CHECK:         linalg.generic {{.*}} ins(%[[S2]], %{{.*}} : tensor<2x12xf32>, tensor<12x3xf32>)
// LOWER-LABEL: func.func @c3k2_like
// LOWER:         %[[BUF:.*]] = tensor.empty() : tensor<2x12xf32>
// LOWER:         %[[I1:.*]] = tensor.extract_slice %[[BUF]][0, 0] [2, 8] [1, 1]
// LOWER:         %[[A:.*]] = linalg.generic {{.*}} outs(%[[I1]] : tensor<2x8xf32>)
// LOWER:           math.exp
// LOWER:         %[[R1:.*]] = tensor.insert_slice %[[A]] into %[[BUF]][0, 0] [2, 8] [1, 1]
// LOWER:         %[[I2:.*]] = tensor.extract_slice %[[R1]][0, 8] [2, 4] [1, 1]
// LOWER:         %[[B:.*]] = linalg.generic {{.*}} ins(%[[R1]] : tensor<2x12xf32>) outs(%[[I2]] : tensor<2x4xf32>)
// LOWER:           arith.negf
// LOWER:         %[[R2:.*]] = tensor.insert_slice %[[B]] into %[[R1]][0, 8] [2, 4] [1, 1]
// LOWER-NOT:     "vt.
func.func @c3k2_like(%x: tensor<2x8xf32>, %w: tensor<12x3xf32>) -> tensor<2x3xf32> {
  %e0 = tensor.empty() : tensor<2x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%e0 : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %lo = tensor.extract_slice %a[0, 0] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %hi = tensor.extract_slice %a[0, 4] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %e1 = tensor.empty() : tensor<2x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%hi : tensor<2x4xf32>) outs(%e1 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %c = tensor.concat dim(1) %lo, %hi, %b : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x12xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<2x3xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = linalg.generic {indexing_maps = [#red_in, #red_w, #red_out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%c, %w : tensor<2x12xf32>, tensor<12x3xf32>) outs(%acc : tensor<2x3xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// The form a torch.cat lowering may take: insert_slices into one tensor.empty. The producer
// computed before the chain writes the buffer; the function argument is copied into its box.
// DECISION-LABEL: points-to @insert_chain:
// DECISION:       concat-store tensor.insert_slice -> %{{.*}}: 1 producer(s) write into the concat buffer, 1 input(s) copied
// DECISION:         input %{{.*}} copied: the stored value is a function argument (no producer to redirect)
// CHECK-LABEL: func.func @insert_chain
// CHECK-NOT:     tensor.insert_slice
// CHECK-SAME:    (%{{.*}}: tensor<2x4xf32>, %[[Y:.*]]: tensor<2x3xf32>)
// CHECK:         %[[BUF:.*]] = tensor.empty() : tensor<2x7xf32>
// CHECK:         %[[S1:.*]] = "vt.store_into"(%[[Y]], %[[BUF]])
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:         %[[S2:.*]] = "vt.store_into"(%[[A]], %[[S1]])
// CHECK:         return %[[S2]]
// LOWER-LABEL: func.func @insert_chain
// LOWER:         linalg.generic {{.*}} ins(%{{.*}} : tensor<2x3xf32>) outs(%{{.*}} : tensor<2x3xf32>)
// LOWER-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// LOWER-NEXT:      linalg.yield %[[IN]] : f32
// LOWER:         linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// LOWER:           math.exp
func.func @insert_chain(%x: tensor<2x4xf32>, %y: tensor<2x3xf32>) -> tensor<2x7xf32> {
  %e0 = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x7xf32>
  %i0 = tensor.insert_slice %a into %e[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x7xf32>
  %i1 = tensor.insert_slice %y into %i0[0, 4] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<2x7xf32>
  return %i1 : tensor<2x7xf32>
}

// Every reader reads the concat through parallel loops: the output-of-input view needs no buffer
// at all (split loops), so the concat is left to the greedy.
// DECISION-LABEL: points-to @concat_left_to_views:
// DECISION:       keep tensor.concat@{{.*}}: every reader can read the concat as a view
// CHECK-LABEL: func.func @concat_left_to_views
// CHECK-NOT:     vt.store_into
// CHECK:         "vt.view"
func.func @concat_left_to_views(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %e0 = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %c = tensor.concat dim(1) %a, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  %e1 = tensor.empty() : tensor<2x8xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<2x8xf32>) outs(%e1 : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// On CUDA every kernel is a launch: a reader of the concat as a view runs once per piece, so
// where both inputs' producers can write the buffer the concat is stored (no split, no copy); on
// the CPU the split is a loop nest more and the concat stays a view. With an argument among the
// inputs (above) the store would copy it, a kernel too: views there also on CUDA.
// DECISION-LABEL: points-to @concat_split_on_cuda:
// DECISION:       keep tensor.concat@{{.*}}: every reader can read the concat as a view
// CUDA-LABEL:     points-to @concat_left_to_views:
// CUDA:           keep tensor.concat@{{.*}}: its readers read it as views, each once per piece: a linalg.generic reading it through a view of 2 pieces would run (or gather it) once per piece, but %arg0 would be copied into the buffer, a kernel each too
// CUDA-LABEL:     points-to @concat_split_on_cuda:
// CUDA:           concat-store tensor.concat -> %{{.*}}: 2 producer(s) write into the concat buffer, 0 input(s) copied
// CUDA:             the concat buffer is needed: a linalg.generic reading it through a view of 2 pieces would run (or gather it) once per piece
// CHECK-LABEL: func.func @concat_split_on_cuda
// CHECK:         "vt.view"
func.func @concat_split_on_cuda(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %e0 = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.log %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %c = tensor.concat dim(1) %a, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  %s = tensor.extract_slice %c[0, 2] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %t = arith.negf %v : f32
    linalg.yield %t : f32
  } -> tensor<2x4xf32>
  return %n : tensor<2x4xf32>
}

// Stores fanning out through a concat: the concat is only written into a cache slot (a slice
// update), so each input's producer writes its part of the slot; neither the concat nor the
// insert is left. The key's producer writes rows 0..1 of the slot, the argument is copied.
// DECISION-LABEL: points-to @fan_out_into_cache:
// DECISION:       concat-store tensor.insert_slice -> %{{.*}}: 1 producer(s) write into the concat buffer, 1 input(s) copied
// DECISION-NEXT:    %{{.*}} written by linalg.generic, map (d0, d1) -> (d0, d1 + 5)
// DECISION-NEXT:    %{{.*}} copied, map (d0, d1) -> (d0 + 2, d1 + 5)
// DECISION-NEXT:    the concat fans out into the tensor.insert_slice's destination
// CHECK-LABEL: func.func @fan_out_into_cache
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4xf32>, %[[Y:.*]]: tensor<1x4xf32>, %[[CACHE:.*]]: tensor<3x16xf32>)
// CHECK-NOT:     tensor.concat
// CHECK-NOT:     tensor.insert_slice
// CHECK:         %[[S1:.*]] = "vt.store_into"(%[[Y]], %[[CACHE]])
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:         %[[S2:.*]] = "vt.store_into"(%[[A]], %[[S1]])
// CHECK:         return %[[S2]]
// LOWER-LABEL: func.func @fan_out_into_cache
// LOWER:         %[[SLOT:.*]] = tensor.extract_slice %{{.*}}[0, 5] [2, 4] [1, 1] : tensor<3x16xf32> to tensor<2x4xf32>
// LOWER:         linalg.generic {{.*}} outs(%[[SLOT]] : tensor<2x4xf32>)
// LOWER:           math.exp
func.func @fan_out_into_cache(%x: tensor<2x4xf32>, %y: tensor<1x4xf32>, %cache: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %e0 = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %c = tensor.concat dim(0) %a, %y : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
  %u = tensor.insert_slice %c into %cache[0, 5] [3, 4] [1, 1] : tensor<3x4xf32> into tensor<3x16xf32>
  return %u : tensor<3x16xf32>
}

// A partial cover: only half of the producer's result reaches the concat; the other half stays in
// a residual tensor of the producer's shape, which its other reader (the negation) reads.
// DECISION-LABEL: points-to @partial_cover_residual:
// DECISION:         %{{.*}} written by linalg.generic -> tensor.extract_slice, map (d0, d1) -> (d0, d1) on 0<=d1<4
// CHECK-LABEL: func.func @partial_cover_residual
// CHECK:         %[[BUF:.*]] = tensor.empty() : tensor<2x7xf32>
// CHECK:         %[[Y:.*]] = "vt.store_into"(%arg1, %[[BUF]])
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:         %[[REST:.*]] = tensor.empty() : tensor<2x8xf32>
// CHECK:         %[[S:.*]]:2 = "vt.store_into"(%[[A]], %[[Y]], %[[REST]])
// CHECK:         "vt.view"(%[[S]]#1) {{.*}} -> tensor<2x4xf32>
// CHECK:           arith.negf
// LOWER-LABEL: func.func @partial_cover_residual
// LOWER:         linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// LOWER:           math.exp
// LOWER:         linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// LOWER:           math.exp
func.func @partial_cover_residual(%x: tensor<2x8xf32>, %y: tensor<2x3xf32>) -> (tensor<2x7xf32>, tensor<2x4xf32>) {
  %e0 = tensor.empty() : tensor<2x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%e0 : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %lo = tensor.extract_slice %a[0, 0] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %hi = tensor.extract_slice %a[0, 4] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %c = tensor.concat dim(1) %lo, %y : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<2x7xf32>
  %e1 = tensor.empty() : tensor<2x4xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%hi : tensor<2x4xf32>) outs(%e1 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %c, %n : tensor<2x7xf32>, tensor<2x4xf32>
}

// The first producer is less than half of the buffer: writing it in would make the whole buffer
// live from there on (a U-Net skip connection), so it is copied; the later producer, computed
// after the buffer is born, still writes into it.
// DECISION-LABEL: points-to @small_early_producer_copied:
// DECISION:       concat-store tensor.concat -> %{{.*}}: 1 producer(s) write into the concat buffer, 1 input(s) copied
// DECISION:         %{{.*}} copied: it would make the buffer (20 elements) live from its producer on, and it is less than half of it
// CHECK-LABEL: func.func @small_early_producer_copied
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:           math.exp
// CHECK:         %[[BUF:.*]] = tensor.empty() : tensor<2x10xf32>
// CHECK:         %[[S1:.*]] = "vt.store_into"(%[[A]], %[[BUF]])
// CHECK:         %[[B:.*]] = linalg.generic
// CHECK:           arith.negf
// CHECK:         "vt.store_into"(%[[B]], %[[S1]])
func.func @small_early_producer_copied(%x: tensor<2x2xf32>, %y: tensor<2x8xf32>, %w: tensor<10x3xf32>) -> tensor<2x3xf32> {
  %e0 = tensor.empty() : tensor<2x2xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x2xf32>) outs(%e0 : tensor<2x2xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x2xf32>
  %e1 = tensor.empty() : tensor<2x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<2x8xf32>) outs(%e1 : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %c = tensor.concat dim(1) %a, %b : (tensor<2x2xf32>, tensor<2x8xf32>) -> tensor<2x10xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<2x3xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [#red_in, #red_w, #red_out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%c, %w : tensor<2x10xf32>, tensor<10x3xf32>) outs(%acc : tensor<2x3xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}

// A concat of two single elements of one producer (`roll` of a split piece, as the importer gives
// it): the producer writes 2 of its 7 elements into the concat buffer and the rest into a residual
// tensor. Its other reader slices element 5, which lies in the buffer: the slice folds into a view
// of the buffer alone, without the residual operand it does not read (fuzz seed 2611 case 2763).
// CHECK-LABEL: func.func @slice_of_stored_element
// CHECK:         %[[ST:.*]]:2 = "vt.store_into"(%{{.*}}, %{{.*}}, %{{.*}}) {{.*}} (tensor<7xf32>, tensor<2xf32>, tensor<7xf32>) -> (tensor<2xf32>, tensor<7xf32>)
// CHECK:         "vt.view"(%[[ST]]#0) {{.*}} : (tensor<2xf32>) -> tensor<1xf32>
func.func @slice_of_stored_element(%x: tensor<7xi64>) -> (tensor<2xf32>, tensor<f32>) {
  %e = tensor.empty() : tensor<7xf32>
  %f = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<7xi64>) outs(%e : tensor<7xf32>) {
  ^bb0(%v: i64, %o: f32):
    %s = arith.sitofp %v : i64 to f32
    linalg.yield %s : f32
  } -> tensor<7xf32>
  %piece = tensor.extract_slice %f[4] [2] [1] : tensor<7xf32> to tensor<2xf32>
  %one = tensor.extract_slice %f[5] [1] [1] : tensor<7xf32> to tensor<1xf32>
  %scalar = tensor.collapse_shape %one [] : tensor<1xf32> into tensor<f32>
  %hi = tensor.extract_slice %piece[1] [1] [1] : tensor<2xf32> to tensor<1xf32>
  %lo = tensor.extract_slice %piece[0] [1] [1] : tensor<2xf32> to tensor<1xf32>
  %c = tensor.concat dim(0) %hi, %lo : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
  return %c, %scalar : tensor<2xf32>, tensor<f32>
}

// -----
// CHECK-LABEL: {{^}}// -----
// LOWER-LABEL: {{^}}// -----
// IR-LABEL: {{^}}// -----

// VTC Fig. 7: c = Concat(a, b), d = Transpose(c). In S(c), the concat edges e0 (c -> a) and e1
// (c -> b) cover disjoint halves of c and are compatible; e2 (c -> d: the transpose's input is
// written straight into d) covers all of c and conflicts with both. a and b are graph inputs and
// d a graph output, so all three edges are usable in the first iteration of Alg. 2 and MAXEDGES
// must pick between {e0, e1} and {e2}: the transpose reads a two-piece view of a and b with its
// loop range split at the piece boundary (vt-lower-views), both pieces Type I, while e2 would write
// c transposed (Type II, incontiguous). The conflict decides: {e0, e1}, e2 rejected.
// CONFLICT-LABEL: points-to @fig7_conflict: 1 virtual tensors, 2 edges, estimated saving 192 B
// CONFLICT-NEXT:  choose e0: %concat -> %arg0 concat output-of-input w=64 (saved 64, penalty 0, gather 0, unblocked 0) type I
// CONFLICT-NEXT:  choose e1: %concat -> %arg1 concat output-of-input w=128 (saved 128, penalty 0, gather 0, unblocked 0) type I
// CONFLICT-NEXT:  reject e2: %concat -> %transposed transpose input-of-output: conflicts with chosen e0, e1 in S(%concat)
// The IR is left as it was.
// IR-LABEL: func.func @fig7_conflict
// IR:         tensor.concat
// IR:         linalg.transpose
//
// The rewrite realises {e0, e1}: the concat becomes a two-piece view of a and b.
// REWRITE-LABEL: points-to @fig7_conflict: 1 virtual tensors, 2 edges, estimated saving 192 B
// REWRITE-LABEL: func.func @fig7_conflict
// REWRITE-SAME:    (%[[A:.*]]: tensor<2x4xf32>, %[[B:.*]]: tensor<4x4xf32>)
// REWRITE-NOT:     tensor.concat
// REWRITE:         %[[V:.*]] = "vt.view"(%[[A]], %[[B]]) {mapping = [{dims = array<i64: 0>, hi = array<i64: 2>, lo = array<i64: 0>, map = #{{.*}}, source = 0 : i64}, {dims = array<i64: 0>, hi = array<i64: 6>, lo = array<i64: 2>, map = #{{.*}}, source = 1 : i64}]
// REWRITE:         linalg.transpose ins(%[[V]]
func.func @fig7_conflict(%a: tensor<2x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x6xf32> {
  %c = tensor.concat dim(0) %a, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %et = tensor.empty() : tensor<4x6xf32>
  %d = linalg.transpose ins(%c : tensor<6x4xf32>) outs(%et : tensor<4x6xf32>) permutation = [1, 0]
  return %d : tensor<4x6xf32>
}

// Two full edges leaving one node conflict (one index of u cannot live in two places): u = exp(x)
// is both transposed (v1) and copied (v2), both returned. u -> v2 (the producer writes u straight
// into the copy's result, Type I) and u -> v1 (writes it transposed, Type II) would each pay; they
// are in S(u), so MAXEDGES keeps the better one and rejects the other.
// CONFLICT-LABEL: points-to @conflict_decides: 1 virtual tensors, 1 edges, estimated saving 256 B
// CONFLICT-NEXT:  choose e1: %[[U:.*]] -> %[[V2:.*]] copy input-of-output w=256 (saved 256, penalty 0, gather 0, unblocked 0) type I
// CONFLICT-NEXT:  reject e0: %[[U]] -> %transposed transpose input-of-output: conflicts with chosen e1 in S(%[[U]])
func.func @conflict_decides(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %u = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %et = tensor.empty() : tensor<8x4xf32>
  %v1 = linalg.transpose ins(%u : tensor<4x8xf32>) outs(%et : tensor<8x4xf32>) permutation = [1, 0]
  %v2 = linalg.copy ins(%u : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %v1, %v2 : tensor<8x4xf32>, tensor<4x8xf32>
}

// -----
// CHECK-LABEL: {{^}}// -----
// LOWER-LABEL: {{^}}// -----
// IR-LABEL: {{^}}// -----

// The KV-cache update of a decode layer (VTC Fig. 2 frame 2, Fig. 3): a fused QKV projection, split
// into Q, K and V; K and V reshaped to heads and transposed; K through a compute op (RoPE in a real
// layer, negf here); both inserted as row 5 of their cache. Both inserts become vt.store_into:
// the negf writes K into the K cache, the matmul writes its V columns into the V cache (mapping
// with floordiv/mod: column -> (head, dim)) and its Q/K columns into a fresh tensor the Q and K
// readers read. No transpose, slice or insert_slice is left.
// DECISION-LABEL: points-to @qkv_cache_update:
// DECISION:       store linalg.generic -> tensor.insert_slice: producer writes into the destination, map (d0, d1, d2, d3) -> (d0, d1, d2 + 5, d3)
// DECISION:       store linalg.matmul -> tensor.expand_shape -> tensor.extract_slice -> tensor.expand_shape -> linalg.transpose -> tensor.insert_slice: producer writes into the destination, map {{.*}} on 8<=d1<12

// CHECK-DAG:   #[[VMAP:.*]] = affine_map<(d0, d1) -> (d0, (d1 mod 12) floordiv 2 - 4, d1 floordiv 12 + 5, d1 mod 2)>
// CHECK-DAG:   #[[ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG:   #[[KMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2 + 5, d3)>
// CHECK-LABEL: func.func @qkv_cache_update
// CHECK-SAME:    (%{{.*}}: tensor<1x8xf32>, %{{.*}}: tensor<8x12xf32>, %[[KC:.*]]: tensor<1x2x16x2xf32>, %[[VC:.*]]: tensor<1x2x16x2xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[QKV:.*]] = linalg.matmul
// CHECK:         %[[REST:.*]] = tensor.empty() : tensor<1x12xf32>
// CHECK:         %[[U:.*]]:2 = "vt.store_into"(%[[QKV]], %[[VC]], %[[REST]]) {mapping = [{dims = array<i64: 1>, hi = array<i64: 12>, lo = array<i64: 8>, map = #[[VMAP]], source = 0 : i64}, {dims = array<i64: 1>, hi = array<i64: 8>, lo = array<i64: 0>, map = #[[ID2]], source = 1 : i64}]
// CHECK:         tensor.expand_shape %[[U]]#1
// CHECK:         %[[K:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<1x2x1x2xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      arith.negf
// CHECK:         %[[KU:.*]] = "vt.store_into"(%[[K]], %[[KC]]) {mapping = [{map = #[[KMAP]], source = 0 : i64}]
// CHECK-NOT:     tensor.insert_slice
// CHECK:         return %{{.*}}, %[[KU]], %[[U]]#0

// vt-lower-views: each producer is re-indexed over its destination box, its init a slice of the
// destination, the result put back at the same place (one-shot bufferization: a subview, no copy).
// LOWER-LABEL: func.func @qkv_cache_update
// LOWER-SAME:    %[[KC:[^:]*]]: tensor<1x2x16x2xf32>, %[[VC:[^:]*]]: tensor<1x2x16x2xf32>)
// LOWER-NOT:     vt.
// LOWER:         %[[VS:.*]] = tensor.extract_slice %[[VC]][0, 0, 5, 0] [1, 2, 1, 2] [1, 1, 1, 1]
// LOWER:         %[[VF:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[VS]] : tensor<1x2x1x2xf32>)
// LOWER:         %[[V:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]{{.*}} outs(%[[VF]] : tensor<1x2x1x2xf32>)
// LOWER:         %[[VU:.*]] = tensor.insert_slice %[[V]] into %[[VC]][0, 0, 5, 0] [1, 2, 1, 2] [1, 1, 1, 1]
// LOWER:         tensor.extract_slice %{{.*}}[0, 0] [1, 8] [1, 1] : tensor<1x12xf32> to tensor<1x8xf32>
// LOWER:         %[[KS:.*]] = tensor.extract_slice %[[KC]][0, 0, 5, 0] [1, 2, 1, 2] [1, 1, 1, 1]
// LOWER:         %[[K:.*]] = linalg.generic {{.*}} outs(%[[KS]] : tensor<1x2x1x2xf32>)
// LOWER:           arith.negf
// LOWER:         %[[KU:.*]] = tensor.insert_slice %[[K]] into %[[KC]][0, 0, 5, 0] [1, 2, 1, 2] [1, 1, 1, 1]
// LOWER:         return %{{.*}}, %[[KU]], %[[VU]]
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @qkv_cache_update(%x: tensor<1x8xf32>, %w: tensor<8x12xf32>, %kc: tensor<1x2x16x2xf32>,
                            %vc: tensor<1x2x16x2xf32>)
    -> (tensor<1x1x4xf32>, tensor<1x2x16x2xf32>, tensor<1x2x16x2xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x12xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x12xf32>) -> tensor<1x12xf32>
  %qkv = linalg.matmul ins(%x, %w : tensor<1x8xf32>, tensor<8x12xf32>) outs(%f : tensor<1x12xf32>) -> tensor<1x12xf32>
  %r = tensor.expand_shape %qkv [[0], [1, 2]] output_shape [1, 1, 12] : tensor<1x12xf32> into tensor<1x1x12xf32>
  %q = tensor.extract_slice %r[0, 0, 0] [1, 1, 4] [1, 1, 1] : tensor<1x1x12xf32> to tensor<1x1x4xf32>
  %k = tensor.extract_slice %r[0, 0, 4] [1, 1, 4] [1, 1, 1] : tensor<1x1x12xf32> to tensor<1x1x4xf32>
  %v = tensor.extract_slice %r[0, 0, 8] [1, 1, 4] [1, 1, 1] : tensor<1x1x12xf32> to tensor<1x1x4xf32>
  %eq = tensor.empty() : tensor<1x1x4xf32>
  %q2 = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%q : tensor<1x1x4xf32>) outs(%eq : tensor<1x1x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<1x1x4xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 1, 2, 2] : tensor<1x1x4xf32> into tensor<1x1x2x2xf32>
  %et = tensor.empty() : tensor<1x2x1x2xf32>
  %kt = linalg.transpose ins(%k4 : tensor<1x1x2x2xf32>) outs(%et : tensor<1x2x1x2xf32>) permutation = [0, 2, 1, 3]
  %kr = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%kt : tensor<1x2x1x2xf32>) outs(%et : tensor<1x2x1x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.negf %a : f32
    linalg.yield %s : f32
  } -> tensor<1x2x1x2xf32>
  %kc2 = tensor.insert_slice %kr into %kc[0, 0, 5, 0] [1, 2, 1, 2] [1, 1, 1, 1] : tensor<1x2x1x2xf32> into tensor<1x2x16x2xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 1, 2, 2] : tensor<1x1x4xf32> into tensor<1x1x2x2xf32>
  %vt = linalg.transpose ins(%v4 : tensor<1x1x2x2xf32>) outs(%et : tensor<1x2x1x2xf32>) permutation = [0, 2, 1, 3]
  %vc2 = tensor.insert_slice %vt into %vc[0, 0, 5, 0] [1, 2, 1, 2] [1, 1, 1, 1] : tensor<1x2x1x2xf32> into tensor<1x2x16x2xf32>
  return %q2, %kc2, %vc2 : tensor<1x1x4xf32>, tensor<1x2x16x2xf32>, tensor<1x2x16x2xf32>
}

// -----
// CHECK-LABEL: {{^}}// -----
// LOWER-LABEL: {{^}}// -----
// IR-LABEL: {{^}}// -----

// Memory-aware Alg. 2 (vtc/memory_check.py): the greedy's views may not raise the peak memory the
// backend allocates. A view reads its physical source, so the source stays allocated until the
// view's last reader.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// A transpose of 8 rows of a 64x64 matmul result, read once before and once after two 64x64
// matmuls (the peak). Physical, the 64x64 result dies at the transpose and only its 2 KB transpose
// crosses the peak; as a view the whole 16 KB result would (49344 B instead of 32896 B). The
// transpose stays; the slices and reshapes around it, which raise nothing, are still views.
// DECISION-LABEL: points-to @view_across_peak:
// DECISION-NOT:   choose e{{[0-9]+}}: %transposed
// DECISION:       keep-physical %transposed (e4 transpose): as a view it keeps its sources allocated until its last reader; peak 49344 B with it virtual, 32896 B without (limit 32896 B)
// DECISION-NEXT:  memory: peak 32896 B with the chosen views, 32896 B without any
// CHECK-LABEL: func.func @view_across_peak
// CHECK:         linalg.transpose
// OFF-LABEL:   points-to @view_across_peak:
// OFF:           choose e4: %transposed
// OFF-NOT:       memory:
func.func @view_across_peak(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a = linalg.matmul ins(%x, %y : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = tensor.extract_slice %a[0, 0] [8, 64] [1, 1] : tensor<64x64xf32> to tensor<8x64xf32>
  %se = tensor.expand_shape %s [[0], [1, 2]] output_shape [8, 4, 16] : tensor<8x64xf32> into tensor<8x4x16xf32>
  %te = tensor.empty() : tensor<4x8x16xf32>
  %t = linalg.transpose ins(%se : tensor<8x4x16xf32>) outs(%te : tensor<4x8x16xf32>) permutation = [1, 0, 2]
  %u = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t : tensor<4x8x16xf32>) outs(%te : tensor<4x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8x16xf32>
  %m = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %n = linalg.matmul ins(%m, %m : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %d = tensor.extract_slice %n[0, 0] [32, 16] [1, 1] : tensor<64x64xf32> to tensor<32x16xf32>
  %de = tensor.expand_shape %d [[0, 1], [2]] output_shape [4, 8, 16] : tensor<32x16xf32> into tensor<4x8x16xf32>
  %r = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t, %de : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%te : tensor<4x8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %v = arith.addf %p, %q : f32
    linalg.yield %v : f32
  } -> tensor<4x8x16xf32>
  return %r, %u : tensor<4x8x16xf32>, tensor<4x8x16xf32>
}

// The contrary case: both readers of the transpose run before the matmuls, so the view's source
// dies before the peak either way; the transpose becomes a view.
// DECISION-LABEL: points-to @view_before_peak:
// DECISION:       choose e{{[0-9]+}}: %transposed -> %expanded transpose output-of-input
// DECISION-NOT:   keep-physical
// DECISION:       memory: peak {{[0-9]+}} B with the chosen views, {{[0-9]+}} B without any
// CHECK-LABEL: func.func @view_before_peak
// CHECK-NOT:     linalg.transpose
// CHECK:         return
func.func @view_before_peak(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a = linalg.matmul ins(%x, %y : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = tensor.extract_slice %a[0, 0] [8, 64] [1, 1] : tensor<64x64xf32> to tensor<8x64xf32>
  %se = tensor.expand_shape %s [[0], [1, 2]] output_shape [8, 4, 16] : tensor<8x64xf32> into tensor<8x4x16xf32>
  %te = tensor.empty() : tensor<4x8x16xf32>
  %t = linalg.transpose ins(%se : tensor<8x4x16xf32>) outs(%te : tensor<4x8x16xf32>) permutation = [1, 0, 2]
  %u = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t : tensor<4x8x16xf32>) outs(%te : tensor<4x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8x16xf32>
  %r = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t, %u : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%te : tensor<4x8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %v = arith.addf %p, %q : f32
    linalg.yield %v : f32
  } -> tensor<4x8x16xf32>
  %m = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %n = linalg.matmul ins(%m, %m : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %r, %u, %n : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<64x64xf32>
}

// -----
// CHECK-LABEL: {{^}}// -----
// LOWER-LABEL: {{^}}// -----
// IR-LABEL: {{^}}// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Constant padding before a convolution (input-of-output, catalogue entry tensor.pad): the
// producer writes the interior of a buffer filled with the padding value; the pad disappears.
// DECISION-LABEL: points-to @pad_interior_written_by_producer:
// DECISION:       store linalg.generic -> tensor.pad: producer writes into the destination, map (d0, d1) -> (d0 + 1, d1 + 2)
// report=PATH is written per split chunk: the file holds the last chunk's report.
// FILE-NOT:       points-to @transpose:
// FILE-LABEL:     points-to @pad_interior_written_by_producer:
// FILE:           store linalg.generic -> tensor.pad: producer writes into the destination, map (d0, d1) -> (d0 + 1, d1 + 2)
// CHECK-LABEL: func.func @pad_interior_written_by_producer
// CHECK-NOT:     tensor.pad
// CHECK:         %[[C:.*]] = arith.constant 5.000000e-01 : f32
// CHECK:         %[[E:.*]] = linalg.generic
// CHECK:           math.exp
// CHECK:         %[[B:.*]] = tensor.empty() : tensor<4x6xf32>
// CHECK:         %[[F:.*]] = linalg.fill ins(%[[C]] : f32) outs(%[[B]] : tensor<4x6xf32>)
// CHECK:         %[[P:.*]] = "vt.store_into"(%[[E]], %[[F]]) {mapping = [{map = #{{.*}}, source = 0 : i64}]
// CHECK:         linalg.generic {{.*}} ins(%[[P]] : tensor<4x6xf32>)
// LOWER-LABEL: func.func @pad_interior_written_by_producer
// LOWER:         %[[S:.*]] = tensor.extract_slice %{{.*}}[1, 2] [2, 3] [1, 1] : tensor<4x6xf32> to tensor<2x3xf32>
// LOWER:         %[[E:.*]] = linalg.generic {{.*}} outs(%[[S]] : tensor<2x3xf32>)
// LOWER:           math.exp
// LOWER:         tensor.insert_slice %[[E]] into %{{.*}}[1, 2] [2, 3] [1, 1]
func.func @pad_interior_written_by_producer(%x: tensor<2x3xf32>) -> tensor<4x6xf32> {
  %c = arith.constant 0.5 : f32
  %e0 = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x3xf32>) outs(%e0 : tensor<2x3xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  %p = tensor.pad %r low[1, 2] high[1, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c : f32
  } : tensor<2x3xf32> to tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x6xf32>
  %o = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<4x6xf32>) outs(%e1 : tensor<4x6xf32>) {
  ^bb0(%v: f32, %o2: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  return %o : tensor<4x6xf32>
}

// The padded value is also read elsewhere: it must stay physical, the pad stays (reason printed).
// DECISION-LABEL: points-to @pad_kept_when_value_is_shared:
// DECISION:       keep tensor.pad@{{.*}}: func.return reads %{{.*}} whole
// CHECK-LABEL: func.func @pad_kept_when_value_is_shared
// CHECK:         tensor.pad
func.func @pad_kept_when_value_is_shared(%x: tensor<2x3xf32>) -> (tensor<4x6xf32>, tensor<2x3xf32>) {
  %c = arith.constant 0.5 : f32
  %e0 = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x3xf32>) outs(%e0 : tensor<2x3xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  %p = tensor.pad %r low[1, 2] high[1, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c : f32
  } : tensor<2x3xf32> to tensor<4x6xf32>
  return %p, %r : tensor<4x6xf32>, tensor<2x3xf32>
}
