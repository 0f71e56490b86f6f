// RUN: vt-opt %s --vt-eliminate-data-movement='report=- rewrite=false' 2>&1 | filecheck %s
// RUN: vt-opt %s --vt-eliminate-data-movement='rewrite=false' | filecheck %s --check-prefix=IR
// RUN: vt-opt %s --vt-eliminate-data-movement='report=-' 2>&1 | filecheck %s --check-prefix=REWRITE

// VTC Fig. 7: c = Concat(a, b), d = Transpose(c). In S(c), the concat edges e0 (c -> a) and e1
// (c -> b) cover disjoint halves of c and are compatible; e2 (c -> d: the transpose's input is
// written straight into d) covers all of c and conflicts with both. a and b are graph inputs and
// d a graph output, so all three edges are usable in the first iteration of Alg. 2 and MAXEDGES
// must pick between {e0, e1} and {e2}: the transpose reads a two-piece view of a and b with its
// loop range split at the piece boundary (vt-lower-views), both pieces Type I, while e2 would write
// c transposed (Type II, incontiguous). The conflict decides: {e0, e1}, e2 rejected.
// CHECK-LABEL: points-to @fig7_conflict: 1 virtual tensors, 2 edges, estimated saving 192 B
// CHECK-NEXT:  choose e0: %concat -> %arg0 concat output-of-input w=64 (saved 64, penalty 0, gather 0, unblocked 0) type I
// CHECK-NEXT:  choose e1: %concat -> %arg1 concat output-of-input w=128 (saved 128, penalty 0, gather 0, unblocked 0) type I
// CHECK-NEXT:  reject e2: %concat -> %transposed transpose input-of-output: conflicts with chosen e0, e1 in S(%concat)
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
// CHECK-LABEL: points-to @conflict_decides: 1 virtual tensors, 1 edges, estimated saving 256 B
// CHECK-NEXT:  choose e1: %[[U:.*]] -> %[[V2:.*]] copy input-of-output w=256 (saved 256, penalty 0, gather 0, unblocked 0) type I
// CHECK-NEXT:  reject e0: %[[U]] -> %transposed transpose input-of-output: conflicts with chosen e1 in S(%[[U]])
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
