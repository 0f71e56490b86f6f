// RUN: vt-opt %s --temco-merge-lconvs | filecheck %s
// RUN: vt-opt %s --temco-merge-lconvs='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#ch = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>

// TeMCO Fig. 9a: concat(x, lconv_a(ra), lconv_b(rb)) -> concat(x, lconv_ab(concat(ra, rb))) where
// lconv_ab's weight holds lconv_a's (2x1) and lconv_b's (3x1) on its block diagonal (zeros
// elsewhere) and its init the inits' per-channel values (a zero fill and a bias broadcast).

// CHECK-LABEL: func.func @dense_parts
// CHECK-SAME:    %[[X:.*]]: tensor<1x3x4x4xf32>, %[[RA:.*]]: tensor<1x1x4x4xf32>, %[[RB:.*]]: tensor<1x1x4x4xf32>
// CHECK:         %[[R:.*]] = tensor.concat dim(1) %[[RA]], %[[RB]] : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK:         %[[BV:.*]] = arith.constant dense<[0.000000e+00, 0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<5xf32>
// CHECK:         %[[B:.*]] = linalg.broadcast ins(%[[BV]] : tensor<5xf32>)
// CHECK:         %[[W:.*]] = arith.constant dense<{{\[}}{{\[}}{{\[}}[5.000000e-01]], {{\[}}[0.000000e+00]]], {{\[}}{{\[}}[5.000000e-01]], {{\[}}[0.000000e+00]]], {{\[}}{{\[}}[0.000000e+00]], {{\[}}[2.500000e-01]]], {{\[}}{{\[}}[0.000000e+00]], {{\[}}[2.500000e-01]]], {{\[}}{{\[}}[0.000000e+00]], {{\[}}[2.500000e-01]]]]> : tensor<5x2x1x1xf32>
// CHECK:         %[[M:.*]] = linalg.conv_2d_nchw_fchw {{.*}}temco.role = "lconv"{{.*}} ins(%[[R]], %[[W]] : tensor<1x2x4x4xf32>, tensor<5x2x1x1xf32>) outs(%[[B]] : tensor<1x5x4x4xf32>)
// CHECK:         %[[C:.*]] = tensor.concat dim(1) %[[X]], %[[M]] : (tensor<1x3x4x4xf32>, tensor<1x5x4x4xf32>) -> tensor<1x8x4x4xf32>
// CHECK:         return %[[C]]
// REPORT: temco-merge-lconvs: {{.*}}: 2 lconvs (2x1, 3x1) -> one block-diagonal lconv
func.func @dense_parts(%x: tensor<1x3x4x4xf32>, %ra: tensor<1x1x4x4xf32>, %rb: tensor<1x1x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %wa = arith.constant dense<0.5> : tensor<2x1x1x1xf32>
  %wb = arith.constant dense<0.25> : tensor<3x1x1x1xf32>
  %bias = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %e2 = tensor.empty() : tensor<1x2x4x4xf32>
  %e3 = tensor.empty() : tensor<1x3x4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %b3 = linalg.broadcast ins(%bias : tensor<3xf32>) outs(%e3 : tensor<1x3x4x4xf32>) dimensions = [0, 2, 3]
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%ra, %wa : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) outs(%f2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%rb, %wb : tensor<1x1x4x4xf32>, tensor<3x1x1x1xf32>) outs(%b3 : tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32>
  %c = tensor.concat dim(1) %x, %a, %b : (tensor<1x3x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x8x4x4xf32>
  return %c : tensor<1x8x4x4xf32>
}

// Left alone: an lconv also used elsewhere (its output is needed anyway), and a lone lconv.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-2: linalg.conv_2d_nchw_fchw
// CHECK-NOT:     linalg.conv_2d_nchw_fchw
func.func @left_alone(%x: tensor<1x3x4x4xf32>, %ra: tensor<1x1x4x4xf32>, %rb: tensor<1x1x4x4xf32>) -> (tensor<1x7x4x4xf32>, tensor<1x2x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %wa = arith.constant dense<0.5> : tensor<2x1x1x1xf32>
  %e2 = tensor.empty() : tensor<1x2x4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%ra, %wa : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) outs(%f2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %b = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%rb, %wa : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) outs(%f2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = tensor.concat dim(1) %a, %x, %b : (tensor<1x2x4x4xf32>, tensor<1x3x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x7x4x4xf32>
  return %c, %a : tensor<1x7x4x4xf32>, tensor<1x2x4x4xf32>
}

// Add form (§3.3, Fig. 9c -> 9a): bn(lconv_a(core_a)) + bn(lconv_b(core_b)) as one lconv over the
// concat of the core outputs. Branch a: (W_a r - mean) * scale (the constant first in the mul);
// branch b: beta - W_b r. Weights [scale*W_a | -W_b] = [[0.5, -3], [0.5, -4]], bias
// -mean*scale + beta = [9.5, 19.5]; the adds, the per-channel ops and both lconvs are gone.
// CHECK-LABEL: func.func @resnet_add
// CHECK:         %[[CA:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%arg0, %arg2
// CHECK:         %[[CB:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%arg1, %arg3
// CHECK:         %[[R:.*]] = tensor.concat dim(1) %[[CA]], %[[CB]] : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32>
// CHECK:         %[[BV:.*]] = arith.constant dense<[9.500000e+00, 1.950000e+01]> : tensor<2xf32>
// CHECK:         %[[B:.*]] = linalg.broadcast ins(%[[BV]] : tensor<2xf32>)
// CHECK:         %[[W:.*]] = arith.constant dense<{{\[}}{{\[}}{{\[}}[5.000000e-01]], {{\[}}[-3.000000e+00]]], {{\[}}{{\[}}[5.000000e-01]], {{\[}}[-4.000000e+00]]]]> : tensor<2x2x1x1xf32>
// CHECK:         %[[M:.*]] = linalg.conv_2d_nchw_fchw {{.*}}temco.role = "lconv"{{.*}} ins(%[[R]], %[[W]] : tensor<1x2x2x2xf32>, tensor<2x2x1x1xf32>) outs(%[[B]] : tensor<1x2x2x2xf32>)
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[M]]
// REPORT: temco-merge-lconvs: {{.*}}: add of 2 lconvs (2x1, 2x1; 2+1 per-channel ops folded) -> one lconv over the concatenated reduced inputs
func.func @resnet_add(%ra: tensor<1x1x4x4xf32>, %rb: tensor<1x1x4x4xf32>, %ga: tensor<1x1x3x3xf32>, %gb: tensor<1x1x3x3xf32>) -> tensor<1x2x2x2xf32> {
  %zero = arith.constant 0.0 : f32
  %wa = arith.constant dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>
  %wb = arith.constant dense<[[[[3.0]]], [[[4.0]]]]> : tensor<2x1x1x1xf32>
  %mean = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %scale = arith.constant dense<[0.5, 0.25]> : tensor<2xf32>
  %beta = arith.constant dense<[10.0, 20.0]> : tensor<2xf32>
  %mean3 = tensor.expand_shape %mean [[0, 1, 2]] output_shape [2, 1, 1] : tensor<2xf32> into tensor<2x1x1xf32>
  %scale3 = tensor.expand_shape %scale [[0, 1, 2]] output_shape [2, 1, 1] : tensor<2xf32> into tensor<2x1x1xf32>
  %beta3 = tensor.expand_shape %beta [[0, 1, 2]] output_shape [2, 1, 1] : tensor<2xf32> into tensor<2x1x1xf32>
  %e1 = tensor.empty() : tensor<1x1x2x2xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %e = tensor.empty() : tensor<1x2x2x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %ca = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%ra, %ga : tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) outs(%f1 : tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %cb = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%rb, %gb : tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) outs(%f1 : tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%ca, %wa : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) outs(%f : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %a1 = linalg.generic {indexing_maps = [#id, #ch, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a, %mean3 : tensor<1x2x2x2xf32>, tensor<2x1x1xf32>) outs(%e : tensor<1x2x2x2xf32>) {
  ^bb0(%in: f32, %c: f32, %out: f32):
    %r = arith.subf %in, %c : f32
    linalg.yield %r : f32
  } -> tensor<1x2x2x2xf32>
  %a2 = linalg.generic {indexing_maps = [#ch, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%scale3, %a1 : tensor<2x1x1xf32>, tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) {
  ^bb0(%c: f32, %in: f32, %out: f32):
    %r = arith.mulf %c, %in : f32
    linalg.yield %r : f32
  } -> tensor<1x2x2x2xf32>
  %b = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%cb, %wb : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) outs(%f : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %b1 = linalg.generic {indexing_maps = [#ch, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%beta3, %b : tensor<2x1x1xf32>, tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) {
  ^bb0(%c: f32, %in: f32, %out: f32):
    %r = arith.subf %c, %in : f32
    linalg.yield %r : f32
  } -> tensor<1x2x2x2xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a2, %b1 : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<1x2x2x2xf32>
  return %s : tensor<1x2x2x2xf32>
}

// Left alone: a ReLU between an lconv and the add (a ResNet identity skip: not affine), and an lconv
// whose input is not a conv result (a function argument here; in a model an activation, which
// fusion computes tile by tile, whereas the concat would make it full-size).
// CHECK-LABEL: func.func @add_left_alone
// CHECK-NOT:     tensor.concat
// CHECK-COUNT-5: linalg.conv_2d_nchw_fchw
// CHECK-NOT:     linalg.conv_2d_nchw_fchw
func.func @add_left_alone(%ra: tensor<1x1x4x4xf32>, %g: tensor<1x1x3x3xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<[[[[1.0]]], [[[2.0]]]]> : tensor<2x1x1x1xf32>
  %e1 = tensor.empty() : tensor<1x1x2x2xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %e = tensor.empty() : tensor<1x2x2x2xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %e4 = tensor.empty() : tensor<1x2x4x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%ra, %g : tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32>) outs(%f1 : tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%c, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) outs(%f : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %b = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%c, %w : tensor<1x1x2x2xf32>, tensor<2x1x1x1xf32>) outs(%f : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %rb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%b : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  } -> tensor<1x2x2x2xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a, %rb : tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<1x2x2x2xf32>
  %x1 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%ra, %w : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) outs(%f4 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %x2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%ra, %w : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) outs(%f4 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %t = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x1, %x2 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) outs(%e4 : tensor<1x2x4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<1x2x4x4xf32>
  return %s, %t : tensor<1x2x2x2xf32>, tensor<1x2x4x4xf32>
}
