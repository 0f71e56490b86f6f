// RUN: vt-opt %s --split-input-file --verify-diagnostics --vt-lower-views | filecheck %s

// vt.store_into of a generic's result: the generic is re-indexed over the destination box and
// writes an extract_slice of the destination, put back in place (bufferizes to a subview).
// CHECK-LABEL: func.func @store_direct
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<2x4xf32>, %[[D:[a-z0-9]+]]: tensor<8x4xf32>
// CHECK-NOT:     vt.store_into
// CHECK:         %[[S:.*]] = tensor.extract_slice %[[D]][3, 0] [2, 4] [1, 1]
// CHECK:         %[[G:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<2x4xf32>) outs(%[[S]] : tensor<2x4xf32>)
// CHECK:           math.exp
// CHECK:         %[[R:.*]] = tensor.insert_slice %[[G]] into %[[D]][3, 0] [2, 4] [1, 1]
// CHECK:         return %[[R]]
func.func @store_direct(%x: tensor<2x4xf32>, %d: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %e = tensor.empty() : tensor<2x4xf32>
  %u = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %r = "vt.store_into"(%u, %d) {mapping = [{map = affine_map<(d0, d1) -> (d0 + 3, d1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// A transposed store (the producer's loops follow the destination: the input map is transposed).
// CHECK-LABEL: func.func @store_transposed
// CHECK:         tensor.extract_slice %{{.*}}[0, 1] [4, 2] [1, 1] : tensor<4x8xf32> to tensor<4x2xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[T:.*]], #{{.*}}]{{.*}} outs(%{{.*}} : tensor<4x2xf32>)
func.func @store_transposed(%x: tensor<2x4xf32>, %d: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<2x4xf32>
  %u = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %r = "vt.store_into"(%u, %d) {mapping = [{map = affine_map<(d0, d1) -> (d1, d0 + 1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// No producer to redirect (a function argument): the value is copied into the box (a gather).
// CHECK-LABEL: func.func @store_argument_copied
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<2x4xf32>, %[[D:[a-z0-9]+]]: tensor<8x4xf32>
// CHECK:         %[[S:.*]] = tensor.extract_slice %[[D]][3, 0] [2, 4] [1, 1]
// CHECK:         %[[G:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<2x4xf32>) outs(%[[S]] : tensor<2x4xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
// CHECK:         tensor.insert_slice %[[G]] into %[[D]][3, 0] [2, 4] [1, 1]
func.func @store_argument_copied(%x: tensor<2x4xf32>, %d: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %r = "vt.store_into"(%x, %d) {mapping = [{map = affine_map<(d0, d1) -> (d0 + 3, d1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// A strided store has no box image: refused, naming the op.
func.func @store_strided(%x: tensor<2x4xf32>, %d: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{cannot lower vt.store_into}}
  %r = "vt.store_into"(%x, %d) {mapping = [{map = affine_map<(d0, d1) -> (d0 * 2, d1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
