// RUN: vt-opt %s --temco-pad-in-place | filecheck %s
// RUN: vt-opt %s --temco-pad-in-place='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT

// A conv's output padded for the next conv: the pad becomes a filled padded tensor with the source
// inserted at the low offsets (eliminate-empty-tensors then computes the conv in that interior).

// CHECK-LABEL: func.func @zero_pad
// CHECK-NOT:     tensor.pad
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<1x2x6x6xf32>
// CHECK:         %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<1x2x6x6xf32>)
// CHECK:         %[[R:.*]] = tensor.insert_slice %{{.*}} into %[[F]][0, 0, 1, 1] [1, 2, 4, 4] [1, 1, 1, 1]
// CHECK:         return %[[R]]
// REPORT: temco-pad-in-place: {{.*}}: tensor<1x2x4x4xf32> into tensor<1x2x6x6xf32>
func.func @zero_pad(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x6x6xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %cst : f32
  } : tensor<1x2x4x4xf32> to tensor<1x2x6x6xf32>
  return %p : tensor<1x2x6x6xf32>
}

// A max-pool's -inf pad with uneven amounts: the fill value is the pad value.
// CHECK-LABEL: func.func @neg_inf_pad
// CHECK:         %[[NI:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         linalg.fill ins(%[[NI]] : f32) outs(%{{.*}} : tensor<2x5x7xf32>)
// CHECK:         tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 2] [2, 4, 4] [1, 1, 1]
func.func @neg_inf_pad(%x: tensor<2x4x4xf32>) -> tensor<2x5x7xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %p = tensor.pad %x low[0, 0, 2] high[0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index):
    tensor.yield %ninf : f32
  } : tensor<2x4x4xf32> to tensor<2x5x7xf32>
  return %p : tensor<2x5x7xf32>
}

// Left alone: a value that depends on the position, and dynamic shapes.
// CHECK-LABEL: func.func @left_alone
// CHECK:         tensor.pad
// CHECK:         tensor.pad
// CHECK-NOT:     tensor.insert_slice
func.func @left_alone(%x: tensor<4xf32>, %y: tensor<?xf32>) -> (tensor<6xf32>, tensor<?xf32>) {
  %cst = arith.constant 1.000000e+00 : f32
  %p = tensor.pad %x low[1] high[1] {
  ^bb0(%i: index):
    %c = arith.index_cast %i : index to i32
    %f = arith.sitofp %c : i32 to f32
    tensor.yield %f : f32
  } : tensor<4xf32> to tensor<6xf32>
  %q = tensor.pad %y low[1] high[1] {
  ^bb0(%i: index):
    tensor.yield %cst : f32
  } : tensor<?xf32> to tensor<?xf32>
  return %p, %q : tensor<6xf32>, tensor<?xf32>
}
