// RUN: vt-opt %s --split-input-file --layout-resolve | filecheck %s
// RUN: vt-opt %s --split-input-file --layout-resolve='share=true' | filecheck %s --check-prefix=SHARE
// RUN: vt-opt %s --split-input-file --layout-resolve='target=cuda' | filecheck %s --check-prefix=CUDA
// RUN: vt-opt %s --split-input-file --layout-resolve='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --split-input-file --layout-resolve | filecheck %s --check-prefix=MAPS

// The views around a conversion re-type it: logical -> NCHW16c physical index, and back.
// MAPS-DAG: #{{map[0-9]*}} = affine_map<(d0, d1, d2, d3) -> (d0, d1 floordiv 16, d2, d3, d1 mod 16)>
// MAPS-DAG: #{{map[0-9]*}} = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 * 16 + d4, d2, d3)>

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bc = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>

// conv (16 | 16 channels: oneDNN-style nChw16c) -> bias add (ANY, inherits) -> conv -> return.
// CHECK-LABEL: func.func @conv_bias_conv
// CHECK-SAME:    %[[X:.*]]: tensor<1x16x8x8xf32>
// CHECK:         %[[C:.*]] = "layout.convert"(%[[X]]) {dst_layout = {block_dims = array<i64: 1>, block_sizes = array<i64: 16>, perm = array<i64: 0, 1, 2, 3>}, src_layout = {perm = array<i64: 0, 1, 2, 3>}} : (tensor<1x16x8x8xf32>) -> tensor<1x1x8x8x16xf32>
// CHECK:         %[[V:.*]] = "vt.view"(%[[C]]) {mapping = [{map = #[[TOBLK:map[0-9]*]], source = 0 : i64}]
// CHECK-SAME:      -> tensor<1x16x8x8xf32>
// CHECK:         %[[C1:.*]] = linalg.conv_2d_nchw_fchw
// CHECK-SAME:      layout.produced = [{block_dims = array<i64: 1>, block_sizes = array<i64: 16>, perm = array<i64: 0, 1, 2, 3>}]
// CHECK-SAME:      {block_dims = array<i64: 1, 0>, block_sizes = array<i64: 16, 16>, perm = array<i64: 0, 1, 2, 3>}
// CHECK-SAME:      ins(%[[V]], %{{.*}} :
// CHECK-NOT:     layout.convert
// CHECK:         %[[A:.*]] = linalg.generic {{.*}} ins(%[[C1]], %{{.*}} : tensor<1x16x8x8xf32>, tensor<16x1x1xf32>)
// CHECK-SAME:      layout.produced = [{block_dims = array<i64: 1>, block_sizes = array<i64: 16>, perm = array<i64: 0, 1, 2, 3>}]
// CHECK-SAME:      layout.required = [{block_dims = array<i64: 1>, block_sizes = array<i64: 16>, perm = array<i64: 0, 1, 2, 3>}, {perm = array<i64: 0, 1, 2>}
// CHECK-NOT:     layout.convert
// CHECK:         %[[C2:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[A]],
// CHECK:         %[[P:.*]] = "vt.view"(%[[C2]]) {mapping = [{map = #[[FROMBLK:map[0-9]*]], source = 0 : i64}]
// CHECK-SAME:      -> tensor<1x1x8x8x16xf32>
// CHECK:         %[[R:.*]] = "layout.convert"(%[[P]]) {dst_layout = {perm = array<i64: 0, 1, 2, 3>}
// CHECK:         return {layout.required = [{perm = array<i64: 0, 1, 2, 3>}]} %[[R]]

// CUDA-LABEL: func.func @conv_bias_conv
// CUDA-NOT:     layout.convert
// CUDA:         linalg.conv_2d_nchw_fchw {{.*}}layout.produced = [{perm = array<i64: 0, 1, 2, 3>}]

// REPORT: layout-resolve report (target cpu)
// REPORT-NEXT: func @conv_bias_conv: conversions 2 -> 2, bytes 8192 -> 8192; 5 constant operand(s) re-laid at compile time
func.func @conv_bias_conv(%x: tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32> {
  %w = arith.constant dense<1.0> : tensor<16x16x1x1xf32>
  %b = arith.constant dense<0.5> : tensor<16x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %c1 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x16x8x8xf32>, tensor<16x16x1x1xf32>) outs(%init : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c1, %b : tensor<1x16x8x8xf32>, tensor<16x1x1xf32>) outs(%e : tensor<1x16x8x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %s = arith.addf %i, %j : f32
    linalg.yield %s : f32
  } -> tensor<1x16x8x8xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%a, %w : tensor<1x16x8x8xf32>, tensor<16x16x1x1xf32>) outs(%init : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  return %c2 : tensor<1x16x8x8xf32>
}

// -----

// 3 input channels: no blocked variant applies, the guideline falls back to NHWC (HWIO weights).
// CHECK-LABEL: func.func @rgb_conv
// CHECK:         "layout.convert"(%{{.*}}) {dst_layout = {perm = array<i64: 0, 2, 3, 1>}
// CHECK:         linalg.conv_2d_nchw_fchw
// CHECK-SAME:      layout.required = [{perm = array<i64: 0, 2, 3, 1>}, {perm = array<i64: 2, 3, 1, 0>}, {perm = array<i64: 0, 2, 3, 1>}]
// REPORT: func @rgb_conv: conversions 2 -> 2
func.func @rgb_conv(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w = arith.constant dense<1.0> : tensor<4x3x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x3x8x8xf32>, tensor<4x3x1x1xf32>) outs(%init : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return %c : tensor<1x4x8x8xf32>
}

// -----

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// A branch node: %x feeds two convolutions. Fig. 8 converts it once per use; share=true once.
// CHECK-LABEL: func.func @branch
// CHECK-COUNT-2: "layout.convert"(%arg0)
// SHARE-LABEL: func.func @branch
// SHARE-COUNT-1: "layout.convert"(%arg0)
// SHARE-NOT:     "layout.convert"(%arg0)
// REPORT: func @branch: conversions 3 -> 3
func.func @branch(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %w = arith.constant dense<1.0> : tensor<8x8x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x4x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %c1 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) outs(%init : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) outs(%init : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c1, %c2 : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) outs(%e : tensor<1x8x4x4xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %r = arith.addf %i, %j : f32
    linalg.yield %r : f32
  } -> tensor<1x8x4x4xf32>
  return %s : tensor<1x8x4x4xf32>
}
