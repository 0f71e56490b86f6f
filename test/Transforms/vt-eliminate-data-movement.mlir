// RUN: vt-opt %s --vt-eliminate-data-movement='report=-' -o %t.mlir 2>&1 | filecheck %s --check-prefix=DECISION
// RUN: filecheck %s --input-file=%t.mlir
// RUN: vt-opt %s --vt-eliminate-data-movement='report=%t.txt' | filecheck %s
// RUN: filecheck %s --input-file=%t.txt --check-prefix=DECISION
// RUN: vt-opt %s --vt-eliminate-data-movement --vt-stats='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=STATS
// RUN: not vt-opt %s --vt-eliminate-data-movement='cost-model=guess' 2>&1 | filecheck %s --check-prefix=BAD

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
