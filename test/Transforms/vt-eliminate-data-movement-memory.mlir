// RUN: vt-opt %s --vt-eliminate-data-movement='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=DECISION
// RUN: vt-opt %s --vt-eliminate-data-movement | filecheck %s
// RUN: vt-opt %s --vt-eliminate-data-movement='report=- memory-aware=false' -o /dev/null 2>&1 | filecheck %s --check-prefix=OFF

// Memory-aware Alg. 2 (vtc/memory_check.py): the greedy's views may not raise the peak memory the
// backend allocates. A view reads its physical source, so the source stays allocated until the
// view's last reader.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// A transpose of 8 rows of a 64x64 matmul result, read once before and once after two 64x64
// matmuls (the peak). Physical, the 64x64 result dies at the transpose and only its 2 KB transpose
// crosses the peak; as a view the whole 16 KB result would (49344 B instead of 32896 B). The
// transpose stays; the slices and reshapes around it, which raise nothing, are still views.
// DECISION-LABEL: points-to @view_across_peak:
// DECISION-NOT:   choose e{{[0-9]+}}: %transposed
// DECISION:       keep-physical %transposed (e4 transpose): as a view it keeps its sources allocated until its last reader; peak 49344 B with it virtual, 32896 B without (limit 32896 B)
// DECISION-NEXT:  memory: peak 32896 B with the chosen views, 32896 B without any
// CHECK-LABEL: func.func @view_across_peak
// CHECK:         linalg.transpose
// OFF-LABEL:   points-to @view_across_peak:
// OFF:           choose e4: %transposed
// OFF-NOT:       memory:
func.func @view_across_peak(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a = linalg.matmul ins(%x, %y : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = tensor.extract_slice %a[0, 0] [8, 64] [1, 1] : tensor<64x64xf32> to tensor<8x64xf32>
  %se = tensor.expand_shape %s [[0], [1, 2]] output_shape [8, 4, 16] : tensor<8x64xf32> into tensor<8x4x16xf32>
  %te = tensor.empty() : tensor<4x8x16xf32>
  %t = linalg.transpose ins(%se : tensor<8x4x16xf32>) outs(%te : tensor<4x8x16xf32>) permutation = [1, 0, 2]
  %u = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t : tensor<4x8x16xf32>) outs(%te : tensor<4x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8x16xf32>
  %m = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %n = linalg.matmul ins(%m, %m : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %d = tensor.extract_slice %n[0, 0] [32, 16] [1, 1] : tensor<64x64xf32> to tensor<32x16xf32>
  %de = tensor.expand_shape %d [[0, 1], [2]] output_shape [4, 8, 16] : tensor<32x16xf32> into tensor<4x8x16xf32>
  %r = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t, %de : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%te : tensor<4x8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %v = arith.addf %p, %q : f32
    linalg.yield %v : f32
  } -> tensor<4x8x16xf32>
  return %r, %u : tensor<4x8x16xf32>, tensor<4x8x16xf32>
}

// The contrary case: both readers of the transpose run before the matmuls, so the view's source
// dies before the peak either way; the transpose becomes a view.
// DECISION-LABEL: points-to @view_before_peak:
// DECISION:       choose e{{[0-9]+}}: %transposed -> %expanded transpose output-of-input
// DECISION-NOT:   keep-physical
// DECISION:       memory: peak {{[0-9]+}} B with the chosen views, {{[0-9]+}} B without any
// CHECK-LABEL: func.func @view_before_peak
// CHECK-NOT:     linalg.transpose
// CHECK:         return
func.func @view_before_peak(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a = linalg.matmul ins(%x, %y : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = tensor.extract_slice %a[0, 0] [8, 64] [1, 1] : tensor<64x64xf32> to tensor<8x64xf32>
  %se = tensor.expand_shape %s [[0], [1, 2]] output_shape [8, 4, 16] : tensor<8x64xf32> into tensor<8x4x16xf32>
  %te = tensor.empty() : tensor<4x8x16xf32>
  %t = linalg.transpose ins(%se : tensor<8x4x16xf32>) outs(%te : tensor<4x8x16xf32>) permutation = [1, 0, 2]
  %u = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t : tensor<4x8x16xf32>) outs(%te : tensor<4x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x8x16xf32>
  %r = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%t, %u : tensor<4x8x16xf32>, tensor<4x8x16xf32>) outs(%te : tensor<4x8x16xf32>) {
  ^bb0(%p: f32, %q: f32, %out: f32):
    %v = arith.addf %p, %q : f32
    linalg.yield %v : f32
  } -> tensor<4x8x16xf32>
  %m = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %n = linalg.matmul ins(%m, %m : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %r, %u, %n : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<64x64xf32>
}
