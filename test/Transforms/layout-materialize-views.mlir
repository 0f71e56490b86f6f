// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize)' | filecheck %s
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize{views=never})' | filecheck %s --check-prefix=NEVER
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize{views=always})' | filecheck %s --check-prefix=ALWAYS
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu}, layout-materialize)' | filecheck %s --check-prefix=BLOCKED
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu}, layout-materialize{views=always})' | filecheck %s --check-prefix=BLOCKED-ALWAYS
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-select-ilp{target=cpu-nhwc}, layout-materialize{report=-})' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: not vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-materialize{views=sometimes})' 2>&1 | filecheck %s --check-prefix=BADOPT
// BADOPT: views must be one of auto, never, always, got 'sometimes'

// A 1x1 conv whose output a reduction (global sum pool) reads once. Under cpu-nhwc the argument's
// conversion feeds the conv, which reads each element F=16 times: a copy (transpose) pays less than
// strided reads. The conv output's conversion feeds the reduction, which reads each element once: a
// free view, folded into the reduction's input map (it reads the NHWC array directly).
// CHECK-DAG: #[[NHWC:map[0-9]*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>
// CHECK-LABEL: func.func @conv_pool
// CHECK-SAME:    (%[[X:.*]]: tensor<1x8x6x6xf32>)
// CHECK:         %[[XT:.*]] = linalg.transpose ins(%[[X]] : tensor<1x8x6x6xf32>)
// CHECK:         %[[C:.*]] = linalg.generic {{.*}} ins(%[[XT]], %{{.*}} : tensor<1x6x6x8xf32>, tensor<1x1x8x16xf32>) outs(%{{.*}} : tensor<1x6x6x16xf32>)
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[S:.*]] = linalg.generic {indexing_maps = [#[[NHWC]], #{{.*}}], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%[[C]] : tensor<1x6x6x16xf32>)
// CHECK-NOT:     vt.view
// CHECK:         return %[[S]]

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
// BLOCKED-LABEL: func.func @conv_pool
// BLOCKED-COUNT-2: linalg.transpose
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
// CHECK-LABEL: func.func @one_by_one
// CHECK-SAME:    (%[[X:.*]]: tensor<1x8x1x1xf32>)
// CHECK:         %[[F:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1, 2, 3]] : tensor<1x8x1x1xf32> into tensor<8xf32>
// CHECK:         tensor.expand_shape %[[F]] {{\[\[}}0, 1, 2, 3]] output_shape [1, 1, 1, 8] : tensor<8xf32> into tensor<1x1x1x8xf32>
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[G:.*]] = tensor.collapse_shape %{{.*}} : tensor<1x1x1x16xf32> into tensor<16xf32>
// CHECK:         %[[R:.*]] = tensor.expand_shape %[[G]] {{.*}} : tensor<16xf32> into tensor<1x16x1x1xf32>
// CHECK:         return %[[R]]
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
