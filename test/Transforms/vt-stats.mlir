// RUN: vt-opt %s --vt-stats='report=-' -o /dev/null 2>&1 | filecheck %s
// RUN: vt-opt %s --vt-stats='annotate=true' 2>/dev/null | filecheck %s --check-prefix=IR
// RUN: vt-opt %s --vt-stats='report=- json=true' -o /dev/null 2>&1 | filecheck %s --check-prefix=JSON
// RUN: vt-opt %s --vt-stats='report=%t' -o /dev/null && filecheck %s --input-file=%t
// report=- is stdout (the IR goes to -o).
// RUN: vt-opt %s --vt-stats='report=-' -o /dev/null 2>/dev/null | filecheck %s

// A QKV-projection-like graph: compute, slices into Q/K and the KV-cache update.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>

// CHECK-LABEL: vt-stats report
// CHECK-LABEL: func @qkv_projection: 3 compute, 4 data-movement, 0 view, 0 other; 12288 bytes moved
// CHECK-NEXT:  compute        fill           linalg.fill      -  {{.*}}vt-stats.mlir:{{[0-9]+}}:10
// CHECK-NEXT:  compute        matmul         linalg.matmul    -  {{.*}}vt-stats.mlir:{{[0-9]+}}:9
// CHECK-NEXT:  data-movement  broadcast      linalg.broadcast 6144 bytes
// CHECK-NEXT:  compute        elementwise    linalg.generic   -
// CHECK-NEXT:  data-movement  slice          tensor.extract_slice 2048 bytes
// CHECK-NEXT:  data-movement  slice          tensor.extract_slice 2048 bytes
// CHECK-NEXT:  data-movement  insert-slice   tensor.insert_slice 2048 bytes
// CHECK-NOT:   tensor.empty
// CHECK-NOT:   arith.constant

// IR-LABEL: func.func @qkv_projection
// IR:         linalg.fill {{.*}}vt.stats.kind = "compute"
// IR:         linalg.broadcast {{.*}}{vt.stats.bytes = 6144 : i64, vt.stats.kind = "data-movement"}
// IR:         tensor.extract_slice {{.*}}{vt.stats.bytes = 2048 : i64, vt.stats.kind = "data-movement"}
// IR:         tensor.insert_slice {{.*}}{vt.stats.bytes = 2048 : i64, vt.stats.kind = "data-movement"}
// IR-NOT:     tensor.empty{{.*}}vt.stats

// JSON:      "name": "qkv_projection"
// JSON-NEXT: "compute": 3,
// JSON-NEXT: "data_movement": 4,
func.func @qkv_projection(%x: tensor<8x64xf32>, %w: tensor<64x192xf32>, %bias: tensor<192xf32>,
                          %cache: tensor<16x64xf32>) -> (tensor<8x64xf32>, tensor<16x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<8x192xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<8x192xf32>) -> tensor<8x192xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<8x64xf32>, tensor<64x192xf32>) outs(%acc : tensor<8x192xf32>) -> tensor<8x192xf32>
  %bias2d = linalg.broadcast ins(%bias : tensor<192xf32>) outs(%init : tensor<8x192xf32>) dimensions = [0]
  %qkv = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias2d : tensor<8x192xf32>, tensor<8x192xf32>) outs(%init : tensor<8x192xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8x192xf32>
  %q = tensor.extract_slice %qkv[0, 0] [8, 64] [1, 1] : tensor<8x192xf32> to tensor<8x64xf32>
  %k = tensor.extract_slice %qkv[0, 64] [8, 64] [1, 1] : tensor<8x192xf32> to tensor<8x64xf32>
  %new_cache = tensor.insert_slice %k into %cache[8, 0] [8, 64] [1, 1] : tensor<8x64xf32> into tensor<16x64xf32>
  return %q, %new_cache : tensor<8x64xf32>, tensor<16x64xf32>
}

// Heads split by a view, then transposed (f16: 2 bytes an element); a permutation-only generic is a transpose too.
// CHECK-LABEL: func @split_heads: 1 compute, 2 data-movement, 2 view, 0 other; 3072 bytes moved
// CHECK-NEXT:  view           reshape        tensor.expand_shape   0 bytes
// CHECK-NEXT:  data-movement  transpose      linalg.transpose      1024 bytes
// CHECK-NEXT:  view           reshape        tensor.collapse_shape 0 bytes
// CHECK-NEXT:  compute        elementwise    arith.extf            -
// CHECK-NEXT:  data-movement  transpose      linalg.generic        2048 bytes
// IR-LABEL: func.func @split_heads
// IR:         tensor.expand_shape {{.*}}{vt.stats.bytes = 0 : i64, vt.stats.kind = "view"}
func.func @split_heads(%q: tensor<8x64xf16>) -> (tensor<4x8x16xf16>, tensor<64x8xf32>) {
  %q3 = tensor.expand_shape %q [[0], [1, 2]] output_shape [8, 4, 16] : tensor<8x64xf16> into tensor<8x4x16xf16>
  %init = tensor.empty() : tensor<4x8x16xf16>
  %heads = linalg.transpose ins(%q3 : tensor<8x4x16xf16>) outs(%init : tensor<4x8x16xf16>) permutation = [1, 0, 2]
  %flat = tensor.collapse_shape %q3 [[0], [1, 2]] : tensor<8x4x16xf16> into tensor<8x64xf16>
  %f = arith.extf %flat : tensor<8x64xf16> to tensor<8x64xf32>
  %tinit = tensor.empty() : tensor<64x8xf32>
  %t = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%f : tensor<8x64xf32>) outs(%tinit : tensor<64x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    linalg.yield %a : f32
  } -> tensor<64x8xf32>
  return %heads, %t : tensor<4x8x16xf16>, tensor<64x8xf32>
}

// Concatenation, padding and a broadcasting generic; i8 elements are one byte each.
// CHECK-LABEL: func @concat_pad_broadcast: 0 compute, 3 data-movement, 0 view, 0 other; 184 bytes moved
// CHECK-NEXT:  data-movement  concat         tensor.concat     64 bytes
// CHECK-NEXT:  data-movement  pad            tensor.pad        72 bytes
// CHECK-NEXT:  data-movement  broadcast      linalg.generic    48 bytes
func.func @concat_pad_broadcast(%a: tensor<4x8xi8>, %b: tensor<4x8xi8>, %v: tensor<8xi8>) -> (tensor<8x8xi8>, tensor<6x12xi8>, tensor<6x8xi8>) {
  %cat = tensor.concat dim(0) %a, %b : (tensor<4x8xi8>, tensor<4x8xi8>) -> tensor<8x8xi8>
  %c0 = arith.constant 0 : i8
  %pad = tensor.pad %a low[1, 2] high[1, 2] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c0 : i8
  } : tensor<4x8xi8> to tensor<6x12xi8>
  %init = tensor.empty() : tensor<6x8xi8>
  %bc = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v : tensor<8xi8>) outs(%init : tensor<6x8xi8>) {
  ^bb0(%x: i8, %out: i8):
    linalg.yield %x : i8
  } -> tensor<6x8xi8>
  return %cat, %pad, %bc : tensor<8x8xi8>, tensor<6x12xi8>, tensor<6x8xi8>
}

// Dynamic shapes: the op is counted, its bytes are unknown.
// CHECK-LABEL: func @dynamic_slice: 0 compute, 1 data-movement, 0 view, 0 other; 0 bytes moved (+1 dynamic)
// CHECK-NEXT:  data-movement  slice          tensor.extract_slice  ? bytes
func.func @dynamic_slice(%t: tensor<?x64xf32>, %n: index) -> tensor<?x64xf32> {
  %s = tensor.extract_slice %t[0, 0] [%n, 64] [1, 1] : tensor<?x64xf32> to tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}

// Virtual tensors move nothing themselves: a vt.view is read through its mapping by its consumer,
// a vt.store_into is written by its producer.
// CHECK-LABEL: func @virtual_qkv: 0 compute, 0 data-movement, 2 view, 0 other; 0 bytes moved
// CHECK-NEXT:  view  mapped-store  vt.store_into  0 bytes
// CHECK-NEXT:  view  virtual  vt.view  0 bytes
func.func @virtual_qkv(%qkv: tensor<2x16xf16>, %q: tensor<2x8xf16>, %kc: tensor<2x32x4xf16>, %vc: tensor<2x32x4xf16>)
    -> (tensor<2x4x2xf16>, tensor<2x32x4xf16>, tensor<2x32x4xf16>) {
  %0:3 = "vt.store_into"(%qkv, %q, %kc, %vc) {mapping = [
      {source = 0 : i64, map = affine_map<(d0, d1) -> (d0, d1)>, dims = array<i64: 1>, lo = array<i64: 0>, hi = array<i64: 8>},
      {source = 1 : i64, map = affine_map<(d0, d1) -> (d0, 7, d1 - 8)>, dims = array<i64: 1>, lo = array<i64: 8>, hi = array<i64: 12>},
      {source = 2 : i64, map = affine_map<(d0, d1) -> (d0, 7, d1 - 12)>, dims = array<i64: 1>, lo = array<i64: 12>, hi = array<i64: 16>}],
      operandSegmentSizes = array<i32: 1, 1, 2, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 2, 0, 0, 0, 0, 0, 0>}
      : (tensor<2x16xf16>, tensor<2x8xf16>, tensor<2x32x4xf16>, tensor<2x32x4xf16>)
      -> (tensor<2x8xf16>, tensor<2x32x4xf16>, tensor<2x32x4xf16>)
  %heads = "vt.view"(%0#0) {mapping = [{source = 0 : i64, map = affine_map<(d0, d1, d2) -> (d0, d1 * 2 + d2)>}],
                            operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>}
      : (tensor<2x8xf16>) -> tensor<2x4x2xf16>
  return %heads, %0#1, %0#2 : tensor<2x4x2xf16>, tensor<2x32x4xf16>, tensor<2x32x4xf16>
}

// CHECK: total: 4 compute, 10 data-movement, 4 view, 0 other; 15544 bytes moved (+1 dynamic) in 5 function(s)
