// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-resolve{target=cpu-nhwc}, layout-hoist)' | filecheck %s
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-resolve{target=cpu-nhwc}, layout-hoist{report=-})' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-resolve{target=cpu-nhwc}, layout-hoist, layout-materialize)' | filecheck %s --check-prefix=MAT

// layout-hoist after naive resolution, then materialised. A branch node: the argument feeds two NHWC convolutions. Naive resolution converts it once per
// use; LHO leaves one conversion, at the top of the function, read by both. The two results are
// different values, so each keeps its own conversion back to the row-major ABI.
// CHECK-LABEL: func.func @branch
// CHECK-SAME:    (%[[X:.*]]: tensor<1x16x8x8xf32>)
// CHECK-NEXT:    %[[C:.*]] = "layout.convert"(%[[X]]) {dst_layout = {perm = array<i64: 0, 2, 3, 1>}, src_layout = {perm = array<i64: 0, 1, 2, 3>}}
// CHECK-NEXT:    %[[V:.*]] = "vt.view"(%[[C]])
// CHECK-NOT:     "layout.convert"(%[[X]])
// CHECK:         linalg.conv_2d_nchw_fchw {{.*}} ins(%[[V]],
// CHECK:         linalg.conv_2d_nchw_fchw {{.*}} ins(%[[V]],
// CHECK-COUNT-2: "layout.convert"
// CHECK-NOT:     "layout.convert"
// CHECK:         return
// REPORT: layout-hoist report
// REPORT-NEXT: func @branch: conversions 4 -> 3, bytes 16384 -> 12288; 1 shared, 0 cancelled, 0 fused
// MAT-LABEL: func.func @branch
// MAT-COUNT-3: linalg.transpose ins(%{{.*}} : tensor<{{.*}}>)
// MAT-NOT:     linalg.transpose
// MAT:         return
func.func @branch(%x: tensor<1x16x8x8xf32>) -> (tensor<1x16x8x8xf32>, tensor<1x16x8x8xf32>) {
  %w = arith.constant dense<1.0> : tensor<16x16x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %c1 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x16x8x8xf32>, tensor<16x16x1x1xf32>) outs(%init : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x16x8x8xf32>, tensor<16x16x1x1xf32>) outs(%init : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  return %c1, %c2 : tensor<1x16x8x8xf32>, tensor<1x16x8x8xf32>
}

