// RUN: vt-opt %s --vt-lower-views | filecheck %s

// The printer's aliases of the folded and gathered maps.
// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[T:map[0-9]*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[HEAD:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1 mod 96)>
// CHECK-DAG: #[[TAIL:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1 + 32)>
// CHECK-DAG: #[[MM_A:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d2, d0)>

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// A single-piece view read by a generic folds into its indexing map: no vt.view, no copy.
// CHECK-LABEL: func.func @fold_transpose
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK-NOT:     vt.view
// CHECK:         linalg.generic {indexing_maps = [#[[T]], #[[ID]]]{{.*}} ins(%[[X]] : tensor<4x8xf32>)
func.func @fold_transpose(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %v = "vt.view"(%x) {mapping = [{map = affine_map<(d0, d1) -> (d1, d0)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %e = tensor.empty() : tensor<8x4xf32>
  %out = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%v : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<8x4xf32>
  return %out : tensor<8x4xf32>
}

// A slice at offset 0 would bring a bare d1 over a larger dimension (96 > 32) and change the loop
// bounds linalg infers; it is guarded as `d1 mod 96` (same value in range). The other slice folds
// as is.
// CHECK-LABEL: func.func @fold_slices
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<1x96xf32>
// CHECK-NOT:     vt.view
// CHECK:         linalg.generic {indexing_maps = [#[[HEAD]], #[[TAIL]], #[[ID]]]{{.*}} ins(%[[X]], %[[X]] : tensor<1x96xf32>, tensor<1x96xf32>)
func.func @fold_slices(%x: tensor<1x96xf32>) -> tensor<1x32xf32> {
  %q = "vt.view"(%x) {mapping = [{map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x96xf32>) -> tensor<1x32xf32>
  %k = "vt.view"(%x) {mapping = [{map = affine_map<(d0, d1) -> (d0, d1 + 32)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x96xf32>) -> tensor<1x32xf32>
  %e = tensor.empty() : tensor<1x32xf32>
  %out = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%q, %k : tensor<1x32xf32>, tensor<1x32xf32>) outs(%e : tensor<1x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x32xf32>
  return %out : tensor<1x32xf32>
}

// Named ops are generalized first, then folded (the transposed operand of a matmul).
// CHECK-LABEL: func.func @fold_into_matmul
// CHECK-NOT:     vt.view
// CHECK:         linalg.generic {indexing_maps = [#[[MM_A]],
func.func @fold_into_matmul(%a: tensor<8x4xf32>, %b: tensor<8x5xf32>) -> tensor<4x5xf32> {
  %at = "vt.view"(%a) {mapping = [{map = affine_map<(d0, d1) -> (d1, d0)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %m = linalg.matmul ins(%at, %b : tensor<4x8xf32>, tensor<8x5xf32>) outs(%acc : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %m : tensor<4x5xf32>
}

// A returned view is materialised with a gather generic (data movement again, but correct).
// CHECK-LABEL: func.func @gather_returned
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK-NOT:     vt.view
// CHECK:         %[[G:.*]] = linalg.generic {indexing_maps = [#[[T]], #[[ID]]]{{.*}} ins(%[[X]] : tensor<4x8xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
// CHECK:         return %[[G]]
func.func @gather_returned(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %v = "vt.view"(%x) {mapping = [{map = affine_map<(d0, d1) -> (d1, d0)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %v : tensor<8x4xf32>
}

// A multi-piece view (concat) is materialised piece by piece into its box.
// CHECK-LABEL: func.func @gather_concat
// CHECK-SAME:    %[[A:[a-z0-9]+]]: tensor<2x8xf32>, %[[B:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK-NOT:     vt.view
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<6x8xf32>
// CHECK:         %[[P0:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<2x8xf32>)
// CHECK:         %[[R0:.*]] = tensor.insert_slice %[[P0]] into %[[E]][0, 0] [2, 8] [1, 1]
// CHECK:         %[[P1:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<4x8xf32>)
// CHECK:         %[[R1:.*]] = tensor.insert_slice %[[P1]] into %[[R0]][2, 0] [4, 8] [1, 1]
// CHECK:         return %[[R1]]
func.func @gather_concat(%a: tensor<2x8xf32>, %b: tensor<4x8xf32>) -> tensor<6x8xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 0>, hi = array<i64: 2>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 0>, hi = array<i64: 6>, lo = array<i64: 2>, map = affine_map<(d0, d1) -> (d0 - 2, d1)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  return %c : tensor<6x8xf32>
}
