// RUN: vt-opt %s --unshare-fill-inits | filecheck %s

#id2 = affine_map<(d0, d1) -> (d0, d1)>

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

// An insert of a value computed into a tensor.empty: the clone goes before that producer (so that
// eliminate-empty-tensors can compute it in the destination) -- unless a size the clone needs is
// defined only after the producer; then it goes right before the insert.
// CHECK-LABEL: func.func @before_the_producer
// CHECK:         %[[F1:.*]] = linalg.fill
// CHECK-NEXT:    %[[P:.*]] = linalg.generic
// CHECK:         tensor.insert_slice %[[P]] into %[[F1]]
// CHECK-LABEL: func.func @size_defined_after_the_producer
// CHECK:         %[[P:.*]] = linalg.generic
// CHECK:         %[[N:.*]] = tensor.dim
// CHECK-NEXT:    %[[E:.*]] = tensor.empty(%[[N]])
// CHECK-NEXT:    %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<?x4xf32>)
// CHECK-NEXT:    tensor.insert_slice %[[P]] into %[[F]]
func.func @before_the_producer(%x: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %e2 = tensor.empty() : tensor<2x4xf32>
  %p = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
       ins(%x : tensor<2x4xf32>) outs(%e2 : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<2x4xf32>
  %i1 = tensor.insert_slice %p into %f[1, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<4x4xf32>
  %i2 = tensor.insert_slice %x into %f[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<4x4xf32>
  return %i1, %i2 : tensor<4x4xf32>, tensor<4x4xf32>
}

func.func @size_defined_after_the_producer(%x: tensor<2x4xf32>, %y: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %c0 = arith.constant 0 : index
  %e2 = tensor.empty() : tensor<2x4xf32>
  %p = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
       ins(%x : tensor<2x4xf32>) outs(%e2 : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<2x4xf32>
  %n = tensor.dim %y, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %i1 = tensor.insert_slice %p into %f[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<?x4xf32>
  %i2 = tensor.insert_slice %x into %f[1, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<?x4xf32>
  return %i1, %i2 : tensor<?x4xf32>, tensor<?x4xf32>
}
