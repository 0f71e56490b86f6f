// RUN: vt-opt %s | vt-opt | filecheck %s
// RUN: vt-opt %s --split-input-file --verify-diagnostics

// Memory layouts: tensor types are physical shapes; the layouts say how they map to the logical
// (NCHW) order. NCHW -> NHWC -> NCHW16c -> NCHW.

// CHECK-LABEL: func.func @convert_chain
// CHECK-SAME:    %[[X:.*]]: tensor<1x32x7x7xf32>
// CHECK:         %[[A:.*]] = "layout.convert"(%[[X]]) {dst_layout = {perm = array<i64: 0, 2, 3, 1>}, src_layout = {perm = array<i64: 0, 1, 2, 3>}} : (tensor<1x32x7x7xf32>) -> tensor<1x7x7x32xf32>
// CHECK:         %[[B:.*]] = "layout.convert"(%[[A]]) {dst_layout = {block_dims = array<i64: 1>, block_sizes = array<i64: 16>, perm = array<i64: 0, 1, 2, 3>}, src_layout = {perm = array<i64: 0, 2, 3, 1>}} : (tensor<1x7x7x32xf32>) -> tensor<1x2x7x7x16xf32>
// CHECK:         %[[C:.*]] = "layout.convert"(%[[B]])
// CHECK-SAME:      -> tensor<1x32x7x7xf32>
// CHECK:         return %[[C]]
func.func @convert_chain(%x: tensor<1x32x7x7xf32>) -> tensor<1x32x7x7xf32> {
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>}, dst_layout = {perm = array<i64: 0, 2, 3, 1>}}
      : (tensor<1x32x7x7xf32>) -> tensor<1x7x7x32xf32>
  %1 = "layout.convert"(%0) {src_layout = {perm = array<i64: 0, 2, 3, 1>},
                             dst_layout = {perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>}}
      : (tensor<1x7x7x32xf32>) -> tensor<1x2x7x7x16xf32>
  %2 = "layout.convert"(%1) {src_layout = {perm = array<i64: 0, 1, 2, 3>, block_dims = array<i64: 1>, block_sizes = array<i64: 16>},
                             dst_layout = {perm = array<i64: 0, 1, 2, 3>}}
      : (tensor<1x2x7x7x16xf32>) -> tensor<1x32x7x7xf32>
  return %2 : tensor<1x32x7x7xf32>
}

// -----

// Dynamic batch; produced/required layouts as discardable attributes on any op.
// CHECK-LABEL: func.func @dynamic_and_annotations
// CHECK:         "layout.convert"
// CHECK-SAME:      (tensor<?x3x8x8xf32>) -> tensor<?x8x8x3xf32>
// CHECK:         linalg.fill
// CHECK-SAME:      layout.produced = [{perm = array<i64: 0, 2, 3, 1>}]
// CHECK-SAME:      layout.required = ["any", {perm = array<i64: 0, 2, 3, 1>}]
func.func @dynamic_and_annotations(%x: tensor<?x3x8x8xf32>, %c: f32) -> tensor<?x8x8x3xf32> {
  %0 = "layout.convert"(%x) {src_layout = {perm = array<i64: 0, 1, 2, 3>}, dst_layout = {perm = array<i64: 0, 2, 3, 1>}}
      : (tensor<?x3x8x8xf32>) -> tensor<?x8x8x3xf32>
  %1 = linalg.fill {layout.produced = [{perm = array<i64: 0, 2, 3, 1>}],
                    layout.required = ["any", {perm = array<i64: 0, 2, 3, 1>}]}
      ins(%c : f32) outs(%0 : tensor<?x8x8x3xf32>) -> tensor<?x8x8x3xf32>
  return %1 : tensor<?x8x8x3xf32>
}
