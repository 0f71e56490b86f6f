// RUN: vt-opt %s --unshare-fill-inits | filecheck %s

// One zero fill (as `cse` leaves it, at the top) is the accumulator of two matmuls: each matmul
// gets its own empty + fill right before it, and the shared one at the top disappears.
// CHECK-LABEL: func.func @two_accumulators
// CHECK:         arith.negf
// CHECK-NEXT:    %[[E0:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT:    %[[F0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E0]] : tensor<4x4xf32>)
// CHECK-NEXT:    %[[A:.*]] = linalg.matmul ins({{.*}}) outs(%[[F0]] : tensor<4x4xf32>)
// CHECK-NEXT:    %[[E1:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT:    %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]] : tensor<4x4xf32>)
// CHECK-NEXT:    linalg.matmul ins(%[[A]], %{{.*}} : tensor<4x4xf32>, tensor<4x4xf32>) outs(%[[F1]] : tensor<4x4xf32>)
// CHECK-NOT:     linalg.fill
// CHECK:         return
func.func @two_accumulators(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = arith.negf %x : tensor<4x4xf32>
  %a = linalg.matmul ins(%n, %y : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = linalg.matmul ins(%a, %y : tensor<4x4xf32>, tensor<4x4xf32>) outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %b : tensor<4x4xf32>
}

// A fill that is the destination of two insert_slices (two pads of one shape), one through a
// reshape: each gets its own fill, with the reshape cloned on top of it.
// CHECK-LABEL: func.func @pad_destinations
// CHECK:         %[[F1:.*]] = linalg.fill
// CHECK-NEXT:    tensor.insert_slice %{{.*}} into %[[F1]][1, 1] [2, 2] [1, 1]
// CHECK:         %[[F2:.*]] = linalg.fill
// CHECK-NEXT:    %[[R:.*]] = tensor.expand_shape %[[F2]]
// CHECK-NEXT:    tensor.insert_slice %{{.*}} into %[[R]][0, 1, 1] [1, 2, 2] [1, 1, 1]
func.func @pad_destinations(%x: tensor<2x2xf32>, %y: tensor<1x2x2xf32>) -> (tensor<4x4xf32>, tensor<1x4x4xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = tensor.expand_shape %f [[0, 1], [2]] output_shape [1, 4, 4] : tensor<4x4xf32> into tensor<1x4x4xf32>
  %p = tensor.insert_slice %x into %f[1, 1] [2, 2] [1, 1] : tensor<2x2xf32> into tensor<4x4xf32>
  %q = tensor.insert_slice %y into %r[0, 1, 1] [1, 2, 2] [1, 1, 1] : tensor<1x2x2xf32> into tensor<1x4x4xf32>
  return %p, %q : tensor<4x4xf32>, tensor<1x4x4xf32>
}

// A fill with one writer, or read only, is left alone.
// CHECK-LABEL: func.func @not_shared
// CHECK-COUNT-1: linalg.fill
// CHECK-NOT:     linalg.fill
func.func @not_shared(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %cst = arith.constant 1.000000e+00 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = arith.addf %x, %f : tensor<4x4xf32>
  return %s, %f : tensor<4x4xf32>, tensor<4x4xf32>
}
