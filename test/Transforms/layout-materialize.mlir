// RUN: vt-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize{loop-order=logical})' | filecheck %s
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize)' | filecheck %s --check-prefix=ORDER
// RUN: not vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-materialize{loop-order=zigzag})' 2>&1 | filecheck %s --check-prefix=BADOPT
// BADOPT: loop-order must be 'output' or 'logical', got 'zigzag'

// Default loop order: the NHWC conv iterates (n, oh, ow | c, kh, kw | f): reductions in their order, f
// (contiguous in the output and in HWIO) innermost; the element-wise op walks NHWC in memory order.
// ORDER-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1 + d4, d2 + d5, d3)>
// ORDER-DAG: #[[HWIO:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d4, d5, d3, d6)>
// ORDER-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d6)>
// ORDER-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// ORDER-DAG: #[[BC:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d3, 0, 0)>
// ORDER-LABEL: func.func @conv_bias_relu
// ORDER:         linalg.generic {indexing_maps = [#[[IN]], #[[HWIO]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel"]}
// ORDER:         linalg.generic {indexing_maps = [#[[ID]], #[[BC]], #[[ID]]]
// ORDER-LABEL: func.func @pad_concat

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bc = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>

func.func @conv_bias_relu(%x: tensor<1x8x6x6xf32>) -> tensor<1x16x6x6xf32> {
  %w = arith.constant dense<1.0> : tensor<16x8x1x1xf32>
  %b = arith.constant dense<0.5> : tensor<16x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x6x6xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x8x6x6xf32>, tensor<16x8x1x1xf32>) outs(%init : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %a = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c, %b : tensor<1x16x6x6xf32>, tensor<16x1x1xf32>) outs(%e : tensor<1x16x6x6xf32>) {
  ^bb0(%in: f32, %bias: f32, %out: f32):
    %s = arith.addf %in, %bias : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<1x16x6x6xf32>
  return %a : tensor<1x16x6x6xf32>
}

// Logical NCHW in and out (the ABI); inside, the conv and the bias+ReLU run on physical NHWC arrays:
// the conv is generalised with its iteration order kept (d4 = c, d5 = kh, d6 = kw) and each map composed
// with its operand's layout; the weight is folded at compile time into an HWIO constant (no run-time
// transpose of it), the zero init is re-made in NHWC; the two conversions are linalg.transposes; no
// vt/layout op or attribute is left.
// CHECK-DAG: #[[NHWC:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>
// CHECK-DAG: #[[BC:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
// CHECK-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d2 + d5, d3 + d6, d4)>
// CHECK-DAG: #[[HWIO:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d5, d6, d4, d1)>
// CHECK-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d2, d3, d1)>
// CHECK-LABEL: func.func @conv_bias_relu
// CHECK-SAME:    (%[[X:.*]]: tensor<1x8x6x6xf32>) -> tensor<1x16x6x6xf32>
// CHECK-NOT:     vt.view
// CHECK-NOT:     layout.
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<1x8x6x6xf32>) outs(%{{.*}} : tensor<1x6x6x8xf32>) permutation = [0, 2, 3, 1]
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[WT:.*]] = arith.constant dense<1.000000e+00> : tensor<1x1x8x16xf32>
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<1x6x6x16xf32>
// CHECK:         %[[INIT:.*]] = linalg.generic {{.*}} outs(%[[E]] : tensor<1x6x6x16xf32>)
// CHECK:         %[[C:.*]] = linalg.generic {indexing_maps = [#[[IN]], #[[HWIO]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%[[XT]], %[[WT]] : tensor<1x6x6x8xf32>, tensor<1x1x8x16xf32>) outs(%[[INIT]] : tensor<1x6x6x16xf32>)
// CHECK:         %[[A:.*]] = linalg.generic {indexing_maps = [#[[NHWC]], #[[BC]], #[[NHWC]]], {{.*}} ins(%[[C]], %{{.*}} : tensor<1x6x6x16xf32>, tensor<16x1x1xf32>) outs(%[[E]] : tensor<1x6x6x16xf32>)
// CHECK:         %[[R:.*]] = linalg.transpose ins(%[[A]] : tensor<1x6x6x16xf32>) outs(%{{.*}} : tensor<1x16x6x6xf32>) permutation = [0, 3, 1, 2]
// CHECK-NOT:     vt.view
// CHECK-NOT:     layout.
// CHECK:         return %[[R]] : tensor<1x16x6x6xf32>

// -----

// Padding and concatenation (layout ANY) follow their operand's permutation.
// CHECK-LABEL: func.func @pad_concat
// CHECK:         tensor.pad %{{.*}} low[0, 1, 1, 0] high[0, 1, 1, 0]
// CHECK:         to tensor<1x8x8x16xf32>
// CHECK:         tensor.concat dim(3) {{.*}} -> tensor<1x6x6x32xf32>
// CHECK-NOT:     layout.
func.func @pad_concat(%x: tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32> {
  %w = arith.constant dense<1.0> : tensor<16x16x3x3xf32>
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x16x6x6xf32> to tensor<1x16x8x8xf32>
  %e = tensor.empty() : tensor<1x16x6x6xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%p, %w : tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>) outs(%init : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%p, %w : tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>) outs(%init : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %cat = tensor.concat dim(1) %c, %c2 : (tensor<1x16x6x6xf32>, tensor<1x16x6x6xf32>) -> tensor<1x32x6x6xf32>
  %w2 = arith.constant dense<1.0> : tensor<16x32x1x1xf32>
  %c3 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%cat, %w2 : tensor<1x32x6x6xf32>, tensor<16x32x1x1xf32>) outs(%init : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  return %c3 : tensor<1x16x6x6xf32>
}
