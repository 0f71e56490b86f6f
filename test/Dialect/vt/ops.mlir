// RUN: vt-opt %s | vt-opt | filecheck %s
// RUN: vt-opt %s --split-input-file --verify-diagnostics

// Virtual tensors round-trip. Python-defined ops print in generic form; the sources_<k>/dests_<k>
// groups in operandSegmentSizes are runs of equal type (see dialects/README.md).

// CHECK-DAG:   #[[EXPAND:.*]] = affine_map<(d0, d1, d2) -> (d0, d1 mod 2, d2)>
// CHECK-DAG:   #[[FLAT:.*]] = affine_map<(d0) -> (d0 floordiv 12, (d0 floordiv 3) mod 4, d0 mod 3)>

// CHECK-LABEL: func.func @transpose_view
// CHECK-SAME:    %[[A:.*]]: tensor<4x2xf32>
// CHECK:         %[[V:.*]] = "vt.view"(%[[A]]) {mapping = [{map = #{{.*}}, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4x2xf32>) -> tensor<2x4xf32>
// CHECK:         return %[[V]]
func.func @transpose_view(%a: tensor<4x2xf32>) -> tensor<2x4xf32> {
  %0 = "vt.view"(%a) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1) -> (d1, d0)>}],
                      operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<4x2xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Concat along dim 0 of differently shaped sources: one piece per source.
// CHECK-LABEL: func.func @concat_view
// CHECK-SAME:    %[[A:[^:]*]]: tensor<2x4xf32>, %[[B:[^:]*]]: tensor<3x4xf32>
// CHECK:         "vt.view"(%[[A]], %[[B]])
// CHECK-SAME:      {dims = array<i64: 0>, hi = array<i64: 2>, lo = array<i64: 0>, map = #{{.*}}, source = 0 : i64}
// CHECK-SAME:      {dims = array<i64: 0>, hi = array<i64: 5>, lo = array<i64: 2>, map = #{{.*}}, source = 1 : i64}
// CHECK-SAME:      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>
// CHECK-SAME:      (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
func.func @concat_view(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>) -> tensor<5x4xf32> {
  %0 = "vt.view"(%a, %b) {mapping = [
      {source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, dims = array<i64: 0>, lo = array<i64: 0>, hi = array<i64: 2>},
      {source = 1 : i64, map = affine_map<(d0, d1) -> (d0 - 2, d1)>, dims = array<i64: 0>, lo = array<i64: 2>, hi = array<i64: 5>}],
      operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>}
      : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}

// -----

// Expand (VTC Eq. 2): floordiv/mod by constants; a reshape of the result reads through it.
// CHECK-LABEL: func.func @expand_then_flatten
// CHECK:         %[[E:.*]] = "vt.view"(%{{.*}}) {mapping = [{map = #[[EXPAND]], source = 0 : i64}]
// CHECK:         "vt.view"(%[[E]]) {mapping = [{map = #[[FLAT]], source = 0 : i64}]
func.func @expand_then_flatten(%a: tensor<1x2x3xf32>) -> tensor<12xf32> {
  %0 = "vt.view"(%a) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1, d2) -> (d0, d1 mod 2, d2)>}],
                      operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<1x2x3xf32>) -> tensor<1x4x3xf32>
  %1 = "vt.view"(%0) {mapping = [{source = 0 : i64, map = affine_map<(d0) -> (d0 floordiv 12, (d0 floordiv 3) mod 4, d0 mod 3)>}],
                      operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<1x4x3xf32>) -> tensor<12xf32>
  return %1 : tensor<12xf32>
}

// -----

// Fused QKV projection writing Q and both KV caches in place (VTC Fig. 3); dynamic batch.
// CHECK-LABEL: func.func @qkv_store
// CHECK-SAME:    %[[QKV:[^:]*]]: tensor<?x16xf16>, %[[Q:[^:]*]]: tensor<?x8xf16>, %[[K:[^:]*]]: tensor<?x32x4xf16>, %[[V:[^:]*]]: tensor<?x32x4xf16>
// CHECK:         %[[R:.*]]:3 = "vt.store_into"(%[[QKV]], %[[Q]], %[[K]], %[[V]])
// CHECK-SAME:      operandSegmentSizes = array<i32: 1, 1, 2, 0, 0, 0, 0, 0, 0>
// CHECK-SAME:      resultSegmentSizes = array<i32: 1, 2, 0, 0, 0, 0, 0, 0>
// CHECK-SAME:      -> (tensor<?x8xf16>, tensor<?x32x4xf16>, tensor<?x32x4xf16>)
// CHECK:         return %[[R]]#0, %[[R]]#1, %[[R]]#2
func.func @qkv_store(%qkv: tensor<?x16xf16>, %q: tensor<?x8xf16>, %kc: tensor<?x32x4xf16>, %vc: tensor<?x32x4xf16>)
    -> (tensor<?x8xf16>, tensor<?x32x4xf16>, tensor<?x32x4xf16>) {
  %0:3 = "vt.store_into"(%qkv, %q, %kc, %vc) {mapping = [
      {source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, dims = array<i64: 1>, lo = array<i64: 0>, hi = array<i64: 8>},
      {source = 1 : i64, map = affine_map<(d0, d1) -> (d0, 7, d1 - 8)>, dims = array<i64: 1>, lo = array<i64: 8>, hi = array<i64: 12>},
      {source = 2 : i64, map = affine_map<(d0, d1) -> (d0, 7, d1 - 12)>, dims = array<i64: 1>, lo = array<i64: 12>, hi = array<i64: 16>}],
      operandSegmentSizes = array<i32: 1, 1, 2, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 2, 0, 0, 0, 0, 0, 0>}
      : (tensor<?x16xf16>, tensor<?x8xf16>, tensor<?x32x4xf16>, tensor<?x32x4xf16>)
      -> (tensor<?x8xf16>, tensor<?x32x4xf16>, tensor<?x32x4xf16>)
  return %0#0, %0#1, %0#2 : tensor<?x8xf16>, tensor<?x32x4xf16>, tensor<?x32x4xf16>
}
