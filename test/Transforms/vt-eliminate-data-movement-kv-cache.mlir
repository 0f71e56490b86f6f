// RUN: vt-opt %s --vt-eliminate-data-movement='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=DECISION
// RUN: vt-opt %s --vt-eliminate-data-movement | filecheck %s
// RUN: vt-opt %s --vt-eliminate-data-movement --vt-lower-views | filecheck %s --check-prefix=LOWER

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
