// RUN: vt-opt %s --codegen-gpu-collapse-contraction-loops | filecheck %s

// Grouped-query attention's q K^T at decode (Gemma 2: 4 kv heads, 2 query heads each, 1 query):
// batch (b, kv head), m (query head in the group, query), n (key), k (head dimension). Two batch
// loops and an outer m loop are more than the block grid's three dimensions hold next to m and n
// (it kept the naive mapping). Every operand reads each run contiguously: one batch loop over
// b x kv head and one m loop over query head x query, through collapse_shape views (K's strided
// cache view included); the sum over k untouched.
// CHECK-DAG: #[[Q:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[K:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-DAG: #[[S:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @gqa_scores
// CHECK:         %[[CQ:.*]] = memref.collapse_shape %arg0 {{\[}}[0, 1], [2, 3], [4]] : memref<1x4x2x1x32xf16> into memref<4x2x32xf16>
// CHECK:         %[[CK:.*]] = memref.collapse_shape %arg1 {{\[}}[0, 1], [2], [3]] : memref<1x4x1024x32xf16, strided<[524288, 131072, 32, 1], offset: 98304>> into memref<4x1024x32xf16, strided<[131072, 32, 1], offset: 98304>>
// CHECK:         %[[CS:.*]] = memref.collapse_shape %arg2 {{\[}}[0, 1], [2, 3], [4]] : memref<1x4x2x1x1024xf32> into memref<4x2x1024xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[Q]], #[[K]], #[[S]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[CQ]], %[[CK]] : {{.*}}) outs(%[[CS]] : memref<4x2x1024xf32>)
// CHECK:           arith.extf
// CHECK:           arith.mulf
// CHECK:           arith.addf
func.func @gqa_scores(%q: memref<1x4x2x1x32xf16>, %k: memref<1x4x1024x32xf16, strided<[524288, 131072, 32, 1], offset: 98304>>,
                      %s: memref<1x4x2x1x1024xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>,
                                   affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5)>,
                                   affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<1x4x2x1x32xf16>, memref<1x4x1024x32xf16, strided<[524288, 131072, 32, 1], offset: 98304>>)
      outs(%s : memref<1x4x2x1x1024xf32>) {
  ^bb0(%a: f16, %b: f16, %out: f32):
    %0 = arith.extf %a : f16 to f32
    %1 = arith.extf %b : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// The batch loops read with a gap between the kv heads of K (not one contiguous dimension): the
// batch run is left alone; the m run (query head x query) is still collapsed.
// CHECK-LABEL: func.func @gapped_batch
// CHECK:         memref.collapse_shape %arg0 {{\[}}[0], [1], [2, 3], [4]] : memref<2x4x2x8x32xf16> into memref<2x4x16x32xf16>
// CHECK-NOT:     memref.collapse_shape %arg1
// CHECK:         iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
func.func @gapped_batch(%q: memref<2x4x2x8x32xf16>, %k: memref<2x4x64x32xf16, strided<[16384, 2048, 32, 1]>>,
                        %s: memref<2x4x2x8x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>,
                                   affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5)>,
                                   affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x4x2x8x32xf16>, memref<2x4x64x32xf16, strided<[16384, 2048, 32, 1]>>)
      outs(%s : memref<2x4x2x8x64xf32>) {
  ^bb0(%a: f16, %b: f16, %out: f32):
    %0 = arith.extf %a : f16 to f32
    %1 = arith.extf %b : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// A plain batch matmul (one batch loop): fits the grid, left alone.
// CHECK-LABEL: func.func @bmm
// CHECK-NOT:     memref.collapse_shape
func.func @bmm(%a: memref<4x64x32xf32>, %b: memref<4x32x48xf32>, %c: memref<4x64x48xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>,
                                   affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>,
                                   affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x64x32xf32>, memref<4x32x48xf32>) outs(%c : memref<4x64x48xf32>) {
  ^bb0(%x: f32, %y: f32, %out: f32):
    %0 = arith.mulf %x, %y : f32
    %1 = arith.addf %out, %0 : f32
    linalg.yield %1 : f32
  }
  return
}
