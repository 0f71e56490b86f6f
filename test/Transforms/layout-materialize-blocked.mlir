// RUN: vt-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(layout-select-ilp{target=cpu}, layout-materialize{loop-order=logical})' | filecheck %s
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu}, layout-materialize)' | filecheck %s --check-prefix=ORDER

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bc = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>

// Blocked layouts made real (target cpu: oneDNN-style nChw16c activations, OIhw16i16o weights).
// The conversions are expand_shape + transpose (and transpose + collapse_shape back); each kernel's
// loops over a blocked dim are split in place, c -> (c/16, c%16): the conv's output channel loop d1
// becomes (d1, d2) and its reduction channel loop d4 becomes (d5, d6), kept before kh, kw (d7, d8), so
// the sum adds in the original order. The weight is folded into a 6-D constant at compile time; the
// bias (row-major, broadcast) reads d1 * 16 + d2.
// With the default loop-order=output, the kernels walk their output in memory order: the conv's loops
// become (n, f/16, oh, ow | c/16, c%16, kh, kw | f%16) — the reductions in their original order, the
// output's innermost dim innermost (contiguous output and weight: what a vector unit runs over).
// ORDER-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d4, d2 + d6, d3 + d7, d5)>
// ORDER-DAG: #[[W:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d1, d4, d6, d7, d5, d8)>
// ORDER-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d1, d2, d3, d8)>
// ORDER-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
// ORDER-DAG: #[[BIAS:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1 * 16 + d4, 0, 0)>
// ORDER-LABEL: func.func @conv_bias_conv
// ORDER:         linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction", "parallel"]}
// ORDER:         linalg.generic {indexing_maps = [#[[ID]], #[[BIAS]], #[[ID]]]
// ORDER-LABEL: func.func @pad_blocked
// CHECK-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d5, d3 + d7, d4 + d8, d6)>
// CHECK-DAG: #[[W:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d1, d5, d7, d8, d6, d2)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d1, d3, d4, d2)>
// CHECK-DAG: #[[BLK:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4, d2)>
// CHECK-DAG: #[[BIAS:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1 * 16 + d2, 0, 0)>
// CHECK-LABEL: func.func @conv_bias_conv
// CHECK-SAME:    (%[[X:.*]]: tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
// CHECK:         %[[E:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 16, 8, 8] : tensor<1x32x8x8xf32> into tensor<1x2x16x8x8xf32>
// CHECK:         %[[XB:.*]] = linalg.transpose ins(%[[E]] : tensor<1x2x16x8x8xf32>) outs(%{{.*}} : tensor<1x2x8x8x16xf32>) permutation = [0, 1, 3, 4, 2]
// CHECK:         %[[WB:.*]] = arith.constant dense<1.000000e+00> : tensor<2x2x1x1x16x16xf32>
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[C:.*]] = linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]} ins(%[[XB]], %[[WB]] : tensor<1x2x8x8x16xf32>, tensor<2x2x1x1x16x16xf32>)
// CHECK:         %[[A:.*]] = linalg.generic {indexing_maps = [#[[BLK]], #[[BIAS]], #[[BLK]]], {{.*}} ins(%[[C]], %{{.*}} : tensor<1x2x8x8x16xf32>, tensor<32x1x1xf32>)
// CHECK:         %[[C2:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[WB]] :
// CHECK:         %[[T:.*]] = linalg.transpose ins(%[[C2]] : tensor<1x2x8x8x16xf32>) outs(%{{.*}} : tensor<1x2x16x8x8xf32>) permutation = [0, 1, 4, 2, 3]
// CHECK:         %[[R:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0], [1, 2], [3], [4]] : tensor<1x2x16x8x8xf32> into tensor<1x32x8x8xf32>
// CHECK-NOT:     layout.
// CHECK:         return %[[R]] : tensor<1x32x8x8xf32>
func.func @conv_bias_conv(%x: tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32> {
  %w = arith.constant dense<1.0> : tensor<32x32x1x1xf32>
  %b = arith.constant dense<0.5> : tensor<32x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x32x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  %c1 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x32x8x8xf32>, tensor<32x32x1x1xf32>) outs(%init : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c1, %b : tensor<1x32x8x8xf32>, tensor<32x1x1xf32>) outs(%e : tensor<1x32x8x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %s = arith.addf %i, %j : f32
    linalg.yield %s : f32
  } -> tensor<1x32x8x8xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%a, %w : tensor<1x32x8x8xf32>, tensor<32x32x1x1xf32>) outs(%init : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  return %c2 : tensor<1x32x8x8xf32>
}

// -----

// Padding the spatial dims of a blocked tensor pads the physical H and W; the region gets one index
// per physical dim.
// CHECK-LABEL: func.func @pad_blocked
// CHECK:         tensor.pad %{{.*}} low[0, 0, 1, 1, 0] high[0, 0, 1, 1, 0]
// CHECK-NEXT:    ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index):
// CHECK:         } : tensor<1x1x6x6x16xf32> to tensor<1x1x8x8x16xf32>
func.func @pad_blocked(%x: tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32> {
  %w = arith.constant dense<1.0> : tensor<16x16x1x1xf32>
  %w3 = arith.constant dense<1.0> : tensor<16x16x3x3xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x6x6xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x16x6x6xf32>, tensor<16x16x1x1xf32>) outs(%init : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %p = tensor.pad %c low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x16x6x6xf32> to tensor<1x16x8x8xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%p, %w3 : tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>) outs(%init : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  return %c2 : tensor<1x16x6x6xf32>
}
