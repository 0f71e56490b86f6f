// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize{loop-order=logical})' | filecheck %s
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize)' | filecheck %s --check-prefix=ORDER
// RUN: not vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-materialize{loop-order=zigzag})' 2>&1 | filecheck %s --check-prefix=BADOPT
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu}, layout-materialize{loop-order=logical})' | filecheck %s --check-prefix=BLOCKED
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu}, layout-materialize)' | filecheck %s --check-prefix=BLOCKED-ORDER
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize)' | filecheck %s --check-prefix=VIEWS
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize{views=never})' | filecheck %s --check-prefix=NEVER
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize{views=always})' | filecheck %s --check-prefix=ALWAYS
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu}, layout-materialize)' | filecheck %s --check-prefix=VIEWS-BLOCKED
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu}, layout-materialize{views=always})' | filecheck %s --check-prefix=BLOCKED-ALWAYS
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize{report=-})' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: not vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-materialize{views=sometimes})' 2>&1 | filecheck %s --check-prefix=VIEWS-BADOPT
// RUN: vt-opt %s --split-input-file --verify-diagnostics --layout-materialize

// The `// -----` chunks are separate modules; the `<PREFIX>-LABEL: {{^}}// -----` lines keep each
// prefix's checks of the printed IR within the chunk they are written in.

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

// -----
// CHECK-LABEL: {{^}}// -----
// ORDER-LABEL: {{^}}// -----
// BLOCKED-LABEL: {{^}}// -----
// BLOCKED-ORDER-LABEL: {{^}}// -----
// VIEWS-LABEL: {{^}}// -----
// NEVER-LABEL: {{^}}// -----
// ALWAYS-LABEL: {{^}}// -----
// VIEWS-BLOCKED-LABEL: {{^}}// -----
// BLOCKED-ALWAYS-LABEL: {{^}}// -----

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
// BLOCKED-ORDER-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d4, d2 + d6, d3 + d7, d5)>
// BLOCKED-ORDER-DAG: #[[W:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d1, d4, d6, d7, d5, d8)>
// BLOCKED-ORDER-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d1, d2, d3, d8)>
// BLOCKED-ORDER-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
// BLOCKED-ORDER-DAG: #[[BIAS:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1 * 16 + d4, 0, 0)>
// BLOCKED-ORDER-LABEL: func.func @conv_bias_conv
// BLOCKED-ORDER:         linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction", "parallel"]}
// BLOCKED-ORDER:         linalg.generic {indexing_maps = [#[[ID]], #[[BIAS]], #[[ID]]]
// BLOCKED-ORDER-LABEL: func.func @pad_blocked
// BLOCKED-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d5, d3 + d7, d4 + d8, d6)>
// BLOCKED-DAG: #[[W:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d1, d5, d7, d8, d6, d2)>
// BLOCKED-DAG: #[[OUT:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d1, d3, d4, d2)>
// BLOCKED-DAG: #[[BLK:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4, d2)>
// BLOCKED-DAG: #[[BIAS:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1 * 16 + d2, 0, 0)>
// BLOCKED-LABEL: func.func @conv_bias_conv
// BLOCKED-SAME:    (%[[X:.*]]: tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
// BLOCKED:         %[[E:.*]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 16, 8, 8] : tensor<1x32x8x8xf32> into tensor<1x2x16x8x8xf32>
// BLOCKED:         %[[XB:.*]] = linalg.transpose ins(%[[E]] : tensor<1x2x16x8x8xf32>) outs(%{{.*}} : tensor<1x2x8x8x16xf32>) permutation = [0, 1, 3, 4, 2]
// BLOCKED:         %[[WB:.*]] = arith.constant dense<1.000000e+00> : tensor<2x2x1x1x16x16xf32>
// BLOCKED-NOT:     linalg.transpose
// BLOCKED:         %[[C:.*]] = linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]} ins(%[[XB]], %[[WB]] : tensor<1x2x8x8x16xf32>, tensor<2x2x1x1x16x16xf32>)
// BLOCKED:         %[[A:.*]] = linalg.generic {indexing_maps = [#[[BLK]], #[[BIAS]], #[[BLK]]], {{.*}} ins(%[[C]], %{{.*}} : tensor<1x2x8x8x16xf32>, tensor<32x1x1xf32>)
// BLOCKED:         %[[C2:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[WB]] :
// BLOCKED:         %[[T:.*]] = linalg.transpose ins(%[[C2]] : tensor<1x2x8x8x16xf32>) outs(%{{.*}} : tensor<1x2x16x8x8xf32>) permutation = [0, 1, 4, 2, 3]
// BLOCKED:         %[[R:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0], [1, 2], [3], [4]] : tensor<1x2x16x8x8xf32> into tensor<1x32x8x8xf32>
// BLOCKED-NOT:     layout.
// BLOCKED:         return %[[R]] : tensor<1x32x8x8xf32>
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
// BLOCKED-LABEL: func.func @pad_blocked
// BLOCKED:         tensor.pad %{{.*}} low[0, 0, 1, 1, 0] high[0, 0, 1, 1, 0]
// BLOCKED-NEXT:    ^bb0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index):
// BLOCKED:         } : tensor<1x1x6x6x16xf32> to tensor<1x1x8x8x16xf32>
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

// -----
// CHECK-LABEL: {{^}}// -----
// ORDER-LABEL: {{^}}// -----
// BLOCKED-LABEL: {{^}}// -----
// BLOCKED-ORDER-LABEL: {{^}}// -----
// VIEWS-LABEL: {{^}}// -----
// NEVER-LABEL: {{^}}// -----
// ALWAYS-LABEL: {{^}}// -----
// VIEWS-BLOCKED-LABEL: {{^}}// -----
// BLOCKED-ALWAYS-LABEL: {{^}}// -----

// VIEWS-BADOPT: views must be one of auto, never, always, got 'sometimes'

// A 1x1 conv whose output a reduction (global sum pool) reads once. Under cpu-nhwc the argument's
// conversion feeds the conv, which reads each element F=16 times: a copy (transpose) pays less than
// strided reads. The conv output's conversion feeds the reduction, which reads each element once: a
// free view, folded into the reduction's input map (it reads the NHWC array directly).
// VIEWS-DAG: #[[NHWC:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>
// VIEWS-LABEL: func.func @conv_pool
// VIEWS-SAME:    (%[[X:.*]]: tensor<1x8x6x6xf32>)
// VIEWS:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<1x8x6x6xf32>)
// VIEWS:         %[[C:.*]] = linalg.generic {{.*}} ins(%[[XT]], %{{.*}} : tensor<1x6x6x8xf32>, tensor<1x1x8x16xf32>) outs(%{{.*}} : tensor<1x6x6x16xf32>)
// VIEWS-NOT:     linalg.transpose
// VIEWS:         %[[S:.*]] = linalg.generic {indexing_maps = [#[[NHWC]], #{{.*}}], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%[[C]] : tensor<1x6x6x16xf32>)
// VIEWS-NOT:     vt.view
// VIEWS:         return %[[S]]

// views=never: both conversions are copies.
// NEVER-LABEL: func.func @conv_pool
// NEVER-COUNT-2: linalg.transpose
// NEVER-NOT:     linalg.transpose

// views=always: the conv reads the NCHW argument through the folded map too; nothing is copied.
// ALWAYS-DAG: #[[IN:map[0-9]*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d3, d1 + d4, d2 + d5)>
// ALWAYS-LABEL: func.func @conv_pool
// ALWAYS-SAME:    (%[[X:.*]]: tensor<1x8x6x6xf32>)
// ALWAYS-NOT:     linalg.transpose
// ALWAYS:         linalg.generic {indexing_maps = [#[[IN]], {{.*}} ins(%[[X]], %{{.*}} : tensor<1x8x6x6xf32>, tensor<1x1x8x16xf32>)
// ALWAYS-NOT:     linalg.transpose

// cpu: the conv runs in NCHW8c. Read through floordiv/mod the reduction's view costs more than the
// copy (views=auto keeps the copy); views=always folds it: the reduction reads the blocked array.
// VIEWS-BLOCKED-LABEL: func.func @conv_pool
// VIEWS-BLOCKED-COUNT-2: linalg.transpose
// BLOCKED-ALWAYS-DAG: #[[B:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1 floordiv 8, d2, d3, d1 mod 8)>
// BLOCKED-ALWAYS-LABEL: func.func @conv_pool
// BLOCKED-ALWAYS:         %[[C:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x8x6x6xf32>, tensor<2x1x1x1x8x8xf32>) outs(%{{.*}} : tensor<1x2x6x6x8xf32>)
// BLOCKED-ALWAYS-NOT:     linalg.transpose
// BLOCKED-ALWAYS:         linalg.generic {indexing_maps = [#[[B]], #{{.*}}], {{.*}} ins(%[[C]] : tensor<1x2x6x6x8xf32>)

// REPORT-LABEL: func @conv_pool: 2 run-time conversions, 1 free views, 1 copies
// REPORT-NEXT:  NCHW -> NHWC (1152 B, 1 consumers, 4608 reads, contiguity none): copy, type II (none): strided reads 18432 B > copy 2304 B
// REPORT-NEXT:  NHWC -> NCHW (2304 B, 1 consumers, 576 reads, contiguity none): view, type II (none): strided reads 2304 B <= copy 4608 B

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#red = affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, 0)>

func.func @conv_pool(%x: tensor<1x8x6x6xf32>) -> tensor<1x16x1x1xf32> {
  %w = arith.constant dense<1.0> : tensor<16x8x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x6x6xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x8x6x6xf32>, tensor<16x8x1x1xf32>) outs(%init : tensor<1x16x6x6xf32>) -> tensor<1x16x6x6xf32>
  %e2 = tensor.empty() : tensor<1x16x1x1xf32>
  %i2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%c : tensor<1x16x6x6xf32>) outs(%i2 : tensor<1x16x1x1xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<1x16x1x1xf32>
  return %s : tensor<1x16x1x1xf32>
}

// -----

// NCHW <-> NHWC of a 1x1 map: the same bytes in the same order (VTC Def. 5 fully contiguous, Type
// I). Both conversions become reshapes (collapse to 1-D + expand), whatever reads them, even the
// return.
// VIEWS-LABEL: func.func @one_by_one
// VIEWS-SAME:    (%[[X:.*]]: tensor<1x8x1x1xf32>)
// VIEWS:         %[[F:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1, 2, 3]] : tensor<1x8x1x1xf32> into tensor<8xf32>
// VIEWS:         tensor.expand_shape %[[F]] {{\[\[}}0, 1, 2, 3]] output_shape [1, 1, 1, 8] : tensor<8xf32> into tensor<1x1x1x8xf32>
// VIEWS-NOT:     linalg.transpose
// VIEWS:         %[[G:.*]] = tensor.collapse_shape %{{.*}} : tensor<1x1x1x16xf32> into tensor<16xf32>
// VIEWS:         %[[R:.*]] = tensor.expand_shape %[[G]] {{.*}} : tensor<16xf32> into tensor<1x16x1x1xf32>
// VIEWS:         return %[[R]]
// NEVER-LABEL: func.func @one_by_one
// NEVER-COUNT-2: linalg.transpose
func.func @one_by_one(%x: tensor<1x8x1x1xf32>) -> tensor<1x16x1x1xf32> {
  %w = arith.constant dense<0.5> : tensor<16x8x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x1x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x8x1x1xf32>, tensor<16x8x1x1xf32>) outs(%init : tensor<1x16x1x1xf32>) -> tensor<1x16x1x1xf32>
  return %c : tensor<1x16x1x1xf32>
}

// -----
// CHECK-LABEL: {{^}}// -----
// ORDER-LABEL: {{^}}// -----
// BLOCKED-LABEL: {{^}}// -----
// BLOCKED-ORDER-LABEL: {{^}}// -----
// VIEWS-LABEL: {{^}}// -----
// NEVER-LABEL: {{^}}// -----
// ALWAYS-LABEL: {{^}}// -----
// VIEWS-BLOCKED-LABEL: {{^}}// -----
// BLOCKED-ALWAYS-LABEL: {{^}}// -----

// A pad of a blocked dim would not be a whole number of blocks: refused, naming the op.
func.func @pad_blocked_channels(%x: tensor<1x16x4x4xf32>) -> tensor<1x32x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{layout-materialize: cannot materialise a tensor.pad of a blocked dim in NCHW16c}}
  %p = tensor.pad %x low[0, 0, 0, 0] high[0, 16, 0, 0] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } {layout.required = [{perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}],
     layout.produced = [{perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}]}
     : tensor<1x16x4x4xf32> to tensor<1x32x4x4xf32>
  return %p : tensor<1x32x4x4xf32>
}

// -----

// A blocked dim indexed by a sum of loops cannot be split: refused, naming the op and why.
#in = affine_map<(d0, d1, d2) -> (d0, d1 + d2)>
#k = affine_map<(d0, d1, d2) -> (d2)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @blocked_sum(%x: tensor<1x32xf32>, %k: tensor<16xf32>, %y: tensor<1x16xf32>) -> tensor<1x16xf32> {
  // expected-error @+1 {{layout-materialize: cannot materialise the blocked layout MN16n of 'linalg.generic': operand 0's blocked dim 1 is indexed by 'd1 + d2', not by a single loop}}
  %r = linalg.generic {indexing_maps = [#in, #k, #out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %k : tensor<1x32xf32>, tensor<16xf32>) outs(%y : tensor<1x16xf32>)
      attrs = {layout.required = [{perm = array<i64: 0, 1>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}, {perm = array<i64: 0>}, {perm = array<i64: 0, 1>}],
               layout.produced = [{perm = array<i64: 0, 1>}]} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<1x16xf32>
  return %r : tensor<1x16xf32>
}
