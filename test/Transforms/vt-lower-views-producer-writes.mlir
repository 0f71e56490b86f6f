// RUN: vt-opt %s --split-input-file --vt-lower-views | filecheck %s

// A multi-piece view (a concat of a matmul result and an argument) read by a reshape cannot be
// read through the mapping: its buffer is needed. The matmul -- nothing else reads its result --
// computes straight into its box of that buffer (its init a slice of the buffer, re-indexed); only
// the argument is copied (gathered) into the other box. No buffer of the matmul's own.
// CHECK-LABEL: func.func @concat_read_by_reshape
// CHECK-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x6xf32>, %[[Y:.*]]: tensor<4x2xf32>)
// CHECK-NOT:     vt.view
// CHECK:         %[[BUF:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT:    %[[BOX:.*]] = tensor.extract_slice %[[BUF]][0, 0] [4, 6] [1, 1]
// CHECK-NEXT:    %[[ACC:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[BOX]] : tensor<4x6xf32>)
// CHECK-NEXT:    %[[MM:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x6xf32>) outs(%[[ACC]] : tensor<4x6xf32>)
// CHECK:         %[[B1:.*]] = tensor.insert_slice %[[MM]] into %[[BUF]][0, 0] [4, 6] [1, 1]
// CHECK:         %[[COPY:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<4x2xf32>)
// CHECK:         %[[B2:.*]] = tensor.insert_slice %[[COPY]] into %[[B1]][0, 6] [4, 2] [1, 1]
// CHECK-NEXT:    tensor.expand_shape %[[B2]]
func.func @concat_read_by_reshape(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %y: tensor<4x2xf32>) -> tensor<2x2x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %a = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%acc : tensor<4x6xf32>) -> tensor<4x6xf32>
  %c = "vt.view"(%a, %y) {mapping = [{dims = array<i64: 1>, hi = array<i64: 6>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 1>, hi = array<i64: 8>, lo = array<i64: 6>, map = affine_map<(d0, d1) -> (d0, d1 - 6)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<4x6xf32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  %r = tensor.expand_shape %c [[0, 1], [2]] output_shape [2, 2, 8] : tensor<4x8xf32> into tensor<2x2x8xf32>
  return %r : tensor<2x2x8xf32>
}

// -----

// The matmul's result has another reader: it keeps its buffer and the view is gathered, piece by
// piece, as before.
// CHECK-LABEL: func.func @shared_producer_gathered
// CHECK:         %[[MM:.*]] = linalg.generic {{.*}} : tensor<4x8xf32>, tensor<8x6xf32>)
// CHECK:         linalg.generic {{.*}} ins(%[[MM]] : tensor<4x6xf32>)
// CHECK:         return
func.func @shared_producer_gathered(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %y: tensor<4x2xf32>) -> (tensor<2x2x8xf32>, tensor<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %a = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%acc : tensor<4x6xf32>) -> tensor<4x6xf32>
  %c = "vt.view"(%a, %y) {mapping = [{dims = array<i64: 1>, hi = array<i64: 6>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 1>, hi = array<i64: 8>, lo = array<i64: 6>, map = affine_map<(d0, d1) -> (d0, d1 - 6)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<4x6xf32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  %r = tensor.expand_shape %c [[0, 1], [2]] output_shape [2, 2, 8] : tensor<4x8xf32> into tensor<2x2x8xf32>
  return %r, %a : tensor<2x2x8xf32>, tensor<4x6xf32>
}
