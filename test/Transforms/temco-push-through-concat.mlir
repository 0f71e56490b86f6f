// RUN: vt-opt %s --temco-push-through-concat | filecheck %s
// RUN: vt-opt %s --temco-push-through-concat='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --temco-push-through-concat --temco-fuse-activation='tile-width=4 split-concat=true' | filecheck %s --check-prefix=SPLIT

// TeMCO §3.3: a DenseNet-BC layer is conv1x1(relu(bn(concat(x, f)))). The BatchNorm's per-channel
// ops (as the importer writes them: a [C,1,1] operand read through (d1, 0, 0)) and the ReLU move to
// the parts, each with its slice of the per-channel constants, and the concat then feeds the conv
// directly, where the concat split (Fig. 9c) applies.

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#ch = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>

// CHECK-LABEL: func.func @bn_relu_conv
// CHECK-SAME:    %[[X:.*]]: tensor<1x2x4x4xf32>, %[[F:.*]]: tensor<1x3x4x4xf32>
// CHECK:         %[[M:.*]] = tensor.expand_shape
// CHECK:         %[[MX:.*]] = tensor.extract_slice %[[M]][0, 0, 0] [2, 1, 1] [1, 1, 1] : tensor<5x1x1xf32> to tensor<2x1x1xf32>
// CHECK:         %[[SX:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MX]] : tensor<1x2x4x4xf32>, tensor<2x1x1xf32>) outs(%{{.*}} : tensor<1x2x4x4xf32>)
// CHECK:           arith.subf
// CHECK:         %[[MF:.*]] = tensor.extract_slice %[[M]][2, 0, 0] [3, 1, 1] [1, 1, 1] : tensor<5x1x1xf32> to tensor<3x1x1xf32>
// CHECK:         %[[SF:.*]] = linalg.generic {{.*}} ins(%[[F]], %[[MF]] : tensor<1x3x4x4xf32>, tensor<3x1x1xf32>) outs(%{{.*}} : tensor<1x3x4x4xf32>)
// CHECK:         %[[RX:.*]] = linalg.generic {{.*}} ins(%[[SX]] : tensor<1x2x4x4xf32>)
// CHECK:         %[[RF:.*]] = linalg.generic {{.*}} ins(%[[SF]] : tensor<1x3x4x4xf32>)
// CHECK:         %[[C:.*]] = tensor.concat dim(1) %[[RX]], %[[RF]]
// CHECK:         linalg.conv_2d_nchw_fchw {{.*}} ins(%[[C]],
// CHECK-NOT:     tensor.concat

// REPORT: temco-push-through-concat: {{.*}}: elementwise op on tensor<1x5x4x4xf32> now runs on its 2 parts (dim 1)
// REPORT-NEXT: temco-push-through-concat: {{.*}}: elementwise op on tensor<1x5x4x4xf32> now runs on its 2 parts (dim 1)
// REPORT-NEXT: temco-push-through-concat: {{.*}}: elementwise op on tensor<1x2x4x4xf32> now runs on its 2 parts (dim 2)
// REPORT-NOT: temco-push-through-concat

// With the split: one accumulating 1x1 conv per part, reading the part's ReLU; no concat is left.
// SPLIT-LABEL: func.func @bn_relu_conv
// SPLIT-NOT:     tensor.concat
// SPLIT:         linalg.conv_2d_nchw_fchw {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x2x4x4xf32>, tensor<4x2x1x1xf32>)
// SPLIT:         linalg.conv_2d_nchw_fchw {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x3x4x4xf32>, tensor<4x3x1x1xf32>)
func.func @bn_relu_conv(%x: tensor<1x2x4x4xf32>, %f: tensor<1x3x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %mean = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0]> : tensor<5xf32>
  %w = arith.constant dense<0.5> : tensor<4x5x1x1xf32>
  %c = tensor.concat dim(1) %x, %f : (tensor<1x2x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x5x4x4xf32>
  %m = tensor.expand_shape %mean [[0, 1, 2]] output_shape [5, 1, 1] : tensor<5xf32> into tensor<5x1x1xf32>
  %e = tensor.empty() : tensor<1x5x4x4xf32>
  %s = linalg.generic {indexing_maps = [#id, #ch, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c, %m : tensor<1x5x4x4xf32>, tensor<5x1x1xf32>) outs(%e : tensor<1x5x4x4xf32>) {
  ^bb0(%in: f32, %p: f32, %out: f32):
    %r = arith.subf %in, %p : f32
    linalg.yield %r : f32
  } -> tensor<1x5x4x4xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x5x4x4xf32>) outs(%e : tensor<1x5x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  } -> tensor<1x5x4x4xf32>
  %e4 = tensor.empty() : tensor<1x4x4x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%relu, %w : tensor<1x5x4x4xf32>, tensor<4x5x1x1xf32>) outs(%f4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %y : tensor<1x4x4x4xf32>
}

// A scalar operand (map without d1) is passed whole, a full-size operand is sliced; a concat along
// the spatial dim works the same way.
// CHECK-LABEL: func.func @scalar_and_full_size
// CHECK:         %[[S0:.*]] = tensor.extract_slice %{{.*}}[0, 0, 0, 0] [1, 2, 3, 4] [1, 1, 1, 1] : tensor<1x2x4x4xf32> to tensor<1x2x3x4xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[S0]] : tensor<1x2x3x4xf32>, tensor<f32>, tensor<1x2x3x4xf32>)
// CHECK:         %[[S1:.*]] = tensor.extract_slice %{{.*}}[0, 0, 3, 0] [1, 2, 1, 4] [1, 1, 1, 1] : tensor<1x2x4x4xf32> to tensor<1x2x1x4xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[S1]] : tensor<1x2x1x4xf32>, tensor<f32>, tensor<1x2x1x4xf32>)
// CHECK:         tensor.concat dim(2)
func.func @scalar_and_full_size(%a: tensor<1x2x3x4xf32>, %b: tensor<1x2x1x4xf32>, %k: tensor<f32>, %y: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %c = tensor.concat dim(2) %a, %b : (tensor<1x2x3x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x4x4xf32>
  %e = tensor.empty() : tensor<1x2x4x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #scalar, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c, %k, %y : tensor<1x2x4x4xf32>, tensor<f32>, tensor<1x2x4x4xf32>) outs(%e : tensor<1x2x4x4xf32>) {
  ^bb0(%in: f32, %s: f32, %t: f32, %out: f32):
    %p = arith.mulf %in, %s : f32
    %q = arith.addf %p, %t : f32
    linalg.yield %q : f32
  } -> tensor<1x2x4x4xf32>
  return %r : tensor<1x2x4x4xf32>
}

// Left alone: the concat has a second user (it would stay live anyway), and an op whose body
// depends on the position (linalg.index would need the part's offset).
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-2: tensor.concat
// CHECK-NOT:     tensor.extract_slice
func.func @left_alone(%a: tensor<1x2x4x4xf32>, %b: tensor<1x2x4x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = tensor.concat dim(1) %a, %b : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x4x4x4xf32>
  %e = tensor.empty() : tensor<1x4x4x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c : tensor<1x4x4x4xf32>) outs(%e : tensor<1x4x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x4x4x4xf32>
  %d = tensor.concat dim(1) %b, %a : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x4x4x4xf32>
  %i = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%d : tensor<1x4x4x4xf32>) outs(%e : tensor<1x4x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %ch = linalg.index 1 : index
    %ci = arith.index_cast %ch : index to i32
    %cf = arith.sitofp %ci : i32 to f32
    %m = arith.addf %in, %cf : f32
    linalg.yield %m : f32
  } -> tensor<1x4x4x4xf32>
  return %r, %c, %i : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>
}
