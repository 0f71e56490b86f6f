// RUN: vt-opt %s --split-input-file --layout-hoist | filecheck %s
// RUN: vt-opt %s --split-input-file --layout-hoist='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-resolve{target=cpu-nhwc}, layout-hoist)' | filecheck %s --check-prefix=BRANCH
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-resolve{target=cpu-nhwc}, layout-hoist{report=-})' -o /dev/null 2>&1 | filecheck %s --check-prefix=BRANCH-REPORT
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(layout-resolve{target=cpu-nhwc}, layout-hoist, layout-materialize)' | filecheck %s --check-prefix=MAT

// The `// -----` chunks are separate modules; the `<PREFIX>-LABEL: {{^}}// -----` lines keep each
// prefix's checks of the printed IR within the chunk they are written in.

#nhwc = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>
#from_nhwc = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1, d2)>
#nwhc = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2, d1)>

// A conversion of a conversion: NCHW -> NHWC -> NCHW cancels (no unit left) ...
// CHECK-LABEL: func.func @cancel
// CHECK-SAME:    (%[[X:.*]]: tensor<1x4x2x3xf32>)
// CHECK-NOT:     layout.convert
// CHECK-NOT:     vt.view
// CHECK:         return %[[X]]
// REPORT: layout-hoist report
// REPORT-NEXT: func @cancel: conversions 2 -> 0, bytes 192 -> 0; 0 shared, 1 cancelled, 0 fused
func.func @cancel(%x: tensor<1x4x2x3xf32>) -> tensor<1x4x2x3xf32> {
  %a = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>}, dst_layout = {perm = array<i64: 0, 2, 3, 1>}} : (tensor<1x4x2x3xf32>) -> tensor<1x2x3x4xf32>
  %b = "vt.view"(%a) {mapping = [{map = #nhwc, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x2x3x4xf32>) -> tensor<1x4x2x3xf32>
  %c = "vt.view"(%b) {mapping = [{map = #from_nhwc, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x4x2x3xf32>) -> tensor<1x2x3x4xf32>
  %d = "layout.convert"(%c) {src_layout = {perm = array<i64: 0, 2, 3, 1>}, dst_layout = {perm = array<i64: 0, 1, 2, 3>}} : (tensor<1x2x3x4xf32>) -> tensor<1x4x2x3xf32>
  return %d : tensor<1x4x2x3xf32>
}

// ... and NCHW -> NHWC -> NWHC fuses into one NCHW -> NWHC conversion.
// CHECK-LABEL: func.func @fuse
// CHECK-SAME:    (%[[X:.*]]: tensor<1x4x2x3xf32>)
// CHECK-NEXT:    %[[C:.*]] = "layout.convert"(%[[X]]) {dst_layout = {perm = array<i64: 0, 3, 2, 1>}, src_layout = {perm = array<i64: 0, 1, 2, 3>}} : (tensor<1x4x2x3xf32>) -> tensor<1x3x2x4xf32>
// CHECK-NEXT:    %[[V:.*]] = "vt.view"(%[[C]]) {{.*}} -> tensor<1x4x2x3xf32>
// CHECK-NEXT:    return %[[V]]
// REPORT-NEXT: func @fuse: conversions 2 -> 1, bytes 192 -> 96; 0 shared, 0 cancelled, 1 fused
func.func @fuse(%x: tensor<1x4x2x3xf32>) -> tensor<1x4x2x3xf32> {
  %a = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>}, dst_layout = {perm = array<i64: 0, 2, 3, 1>}} : (tensor<1x4x2x3xf32>) -> tensor<1x2x3x4xf32>
  %b = "vt.view"(%a) {mapping = [{map = #nhwc, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x2x3x4xf32>) -> tensor<1x4x2x3xf32>
  %c = "vt.view"(%b) {mapping = [{map = #from_nhwc, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x4x2x3xf32>) -> tensor<1x2x3x4xf32>
  %d = "layout.convert"(%c) {src_layout = {perm = array<i64: 0, 2, 3, 1>}, dst_layout = {perm = array<i64: 0, 3, 2, 1>}} : (tensor<1x2x3x4xf32>) -> tensor<1x3x2x4xf32>
  %e = "vt.view"(%d) {mapping = [{map = #nwhc, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x3x2x4xf32>) -> tensor<1x4x2x3xf32>
  return %e : tensor<1x4x2x3xf32>
}

// -----

// A value converted to two different layouts keeps two conversions; each is shared by its users.
// CHECK-LABEL: func.func @two_layouts
// CHECK-SAME:    (%[[X:.*]]: tensor<1x4x2x3xf32>)
// CHECK-NEXT:    "layout.convert"(%[[X]]) {dst_layout = {perm = array<i64: 0, 2, 3, 1>}
// CHECK-NEXT:    "vt.view"
// CHECK-NEXT:    "layout.convert"(%[[X]]) {dst_layout = {perm = array<i64: 0, 3, 2, 1>}
// CHECK-NEXT:    "vt.view"
// CHECK-NOT:     layout.convert
// CHECK:         return
// REPORT: layout-hoist report
// REPORT-NEXT: func @two_layouts: conversions 4 -> 2, bytes 384 -> 192; 2 shared, 0 cancelled, 0 fused
#nhwc = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3, d1)>
#nwhc = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2, d1)>
func.func @two_layouts(%x: tensor<1x4x2x3xf32>) -> (tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>) {
  %a = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>}, dst_layout = {perm = array<i64: 0, 2, 3, 1>}} : (tensor<1x4x2x3xf32>) -> tensor<1x2x3x4xf32>
  %av = "vt.view"(%a) {mapping = [{map = #nhwc, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x2x3x4xf32>) -> tensor<1x4x2x3xf32>
  %b = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>}, dst_layout = {perm = array<i64: 0, 3, 2, 1>}} : (tensor<1x4x2x3xf32>) -> tensor<1x3x2x4xf32>
  %bv = "vt.view"(%b) {mapping = [{map = #nwhc, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x3x2x4xf32>) -> tensor<1x4x2x3xf32>
  %c = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>}, dst_layout = {perm = array<i64: 0, 2, 3, 1>}} : (tensor<1x4x2x3xf32>) -> tensor<1x2x3x4xf32>
  %cv = "vt.view"(%c) {mapping = [{map = #nhwc, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x2x3x4xf32>) -> tensor<1x4x2x3xf32>
  %d = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>}, dst_layout = {perm = array<i64: 0, 3, 2, 1>}} : (tensor<1x4x2x3xf32>) -> tensor<1x3x2x4xf32>
  %dv = "vt.view"(%d) {mapping = [{map = #nwhc, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x3x2x4xf32>) -> tensor<1x4x2x3xf32>
  return %av, %bv, %cv, %dv : tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>, tensor<1x4x2x3xf32>
}

// -----
// CHECK-LABEL: {{^}}// -----
// BRANCH-LABEL: {{^}}// -----
// MAT-LABEL: {{^}}// -----

// layout-hoist after naive resolution, then materialised. A branch node: the argument feeds two NHWC convolutions. Naive resolution converts it once per
// use; LHO leaves one conversion, at the top of the function, read by both. The two results are
// different values, so each keeps its own conversion back to the row-major ABI.
// BRANCH-LABEL: func.func @branch
// BRANCH-SAME:    (%[[X:.*]]: tensor<1x16x8x8xf32>)
// BRANCH-NEXT:    %[[C:.*]] = "layout.convert"(%[[X]]) {dst_layout = {perm = array<i64: 0, 2, 3, 1>}, src_layout = {perm = array<i64: 0, 1, 2, 3>}}
// BRANCH-NEXT:    %[[V:.*]] = "vt.view"(%[[C]])
// BRANCH-NOT:     "layout.convert"(%[[X]])
// BRANCH:         linalg.conv_2d_nchw_fchw {{.*}} ins(%[[V]],
// BRANCH:         linalg.conv_2d_nchw_fchw {{.*}} ins(%[[V]],
// BRANCH-COUNT-2: "layout.convert"
// BRANCH-NOT:     "layout.convert"
// BRANCH:         return
// BRANCH-REPORT: layout-hoist report
// BRANCH-REPORT-LABEL: func @branch: conversions 4 -> 3, bytes 16384 -> 12288; 1 shared, 0 cancelled, 0 fused
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
