// RUN: vt-opt %s --vt-lower-views='min-piece=4' | filecheck %s
// RUN: vt-opt %s --vt-lower-views | filecheck %s --check-prefix=SPLIT
// RUN: not vt-opt %s --vt-lower-views='min-piece=-1' -o /dev/null 2>&1 | filecheck %s --check-prefix=BAD

// A concat view whose first piece (2 rows) is narrower than min-piece: its reader is not split;
// one loop nest selects each element's piece (issue 3 point 5: "per-element select only where
// the pieces are finer than a tile"). Both sources are loaded at indices clamped into them.
// CHECK-LABEL: func.func @select_fine_pieces
// CHECK-SAME:    %[[A:[a-z0-9]+]]: tensor<2x8xf32>, %[[B:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK-NOT:     vt.view
// CHECK-NOT:     tensor.insert_slice
// CHECK:         linalg.generic {{.*}} ins(%[[A]] : tensor<2x8xf32>) outs(%{{.*}} : tensor<6x8xf32>)
// CHECK:           %[[I0:.*]] = linalg.index 0 : index
// CHECK:           %[[I1:.*]] = linalg.index 1 : index
// CHECK:           %[[VB:.*]] = tensor.extract %[[B]]
// CHECK:           %[[VA:.*]] = tensor.extract %[[A]]
// CHECK:           %[[IN:.*]] = arith.andi
// CHECK:           %[[V:.*]] = arith.select %[[IN]], %[[VA]], %[[VB]] : f32
// CHECK:           math.exp %[[V]]
// CHECK-NOT:     linalg.generic
// SPLIT-LABEL: func.func @select_fine_pieces
// SPLIT:         tensor.insert_slice
// SPLIT:         tensor.insert_slice
func.func @select_fine_pieces(%a: tensor<2x8xf32>, %b: tensor<4x8xf32>) -> tensor<6x8xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 0>, hi = array<i64: 2>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 0>, hi = array<i64: 6>, lo = array<i64: 2>, map = affine_map<(d0, d1) -> (d0 - 2, d1)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %e = tensor.empty() : tensor<6x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<6x8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  return %r : tensor<6x8xf32>
}

// The split dim is a reduction loop (a matmul reducing over a concat): split loops cannot take it
// and the view used to be gathered; the select form reads it in place.
// CHECK-LABEL: func.func @select_reduction_over_concat
// CHECK-NOT:     vt.view
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:           arith.select
// CHECK:           arith.mulf
// SPLIT-LABEL: func.func @select_reduction_over_concat
// SPLIT:         linalg.generic {{.*}} ins(%{{.*}} : tensor<3x2xf32>) outs(%{{.*}} : tensor<3x2xf32>)
// SPLIT-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// SPLIT-NEXT:      linalg.yield %[[IN]] : f32
func.func @select_reduction_over_concat(%a: tensor<3x2xf32>, %b: tensor<3x2xf32>, %w: tensor<4x5xf32>) -> tensor<3x5xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 1>, hi = array<i64: 2>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 1>, hi = array<i64: 4>, lo = array<i64: 2>, map = affine_map<(d0, d1) -> (d0, d1 - 2)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x5xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<3x5xf32>) -> tensor<3x5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%c, %w : tensor<3x4xf32>, tensor<4x5xf32>) outs(%acc : tensor<3x5xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<3x5xf32>
  return %r : tensor<3x5xf32>
}

// BAD: error: vt-lower-views: min-piece must not be negative
