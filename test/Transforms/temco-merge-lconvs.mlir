// RUN: vt-opt %s --temco-merge-lconvs | filecheck %s
// RUN: vt-opt %s --temco-merge-lconvs='output=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT

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
