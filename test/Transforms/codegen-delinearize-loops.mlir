// RUN: vt-opt %s --codegen-delinearize-loops | filecheck %s

#q = affine_map<(d0, d1, d2, d3) -> (d0 floordiv 4, d1, (d0 mod 4) * 16 + d3 + 64)>
#k = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
#o = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#p = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#v = affine_map<(d0, d1, d2, d3) -> (0, (d0 mod 8) floordiv 4, d3, d2)>
#x = affine_map<(d0, d1) -> (d0 floordiv 4, d0 mod 4, d1)>
#y = affine_map<(d0, d1) -> (d0, d1)>
#r = affine_map<(d0, d1) -> ((d0 floordiv 4) * 32 + d1)>
#z = affine_map<(d0, d1) -> (d1, d0)>
#bad = affine_map<(d0, d1) -> (d0 floordiv 3, d1)>
#pin = affine_map<(n, c, h, w, kh, kw) -> (n, c, h + kh, w + kw)>
#pk = affine_map<(n, c, h, w, kh, kw) -> (kh, kw)>
#pout = affine_map<(n, c, h, w, kh, kw) -> (n, c, h, w)>

// Attention's Q read out of a fused QKV projection [b, s, 3 * h * hd] (b = 2, h = 4, hd = 16; K at
// offset 64): the loop over batch x heads (8) splits into (2, 4); the K slice of the projection is a
// subview at offset 64 expanded into (heads, head_dim); the other operands expand their d0.
// CHECK-LABEL: func.func @qkv_heads
// CHECK:         %[[SV:.*]] = memref.subview %arg0[0, 0, 64] [2, 5, 64] [1, 1, 1] : memref<2x5x192xf32> to memref<2x5x64xf32, strided<[960, 192, 1], offset: 64>>
// CHECK:         %[[Q:.*]] = memref.expand_shape %[[SV]] {{\[\[}}0], [1], [2, 3]] output_shape [2, 5, 4, 16] : memref<2x5x64xf32, strided<[960, 192, 1], offset: 64>> into memref<2x5x4x16xf32, strided<[960, 192, 16, 1], offset: 64>>
// CHECK:         %[[K:.*]] = memref.expand_shape %arg1 {{\[\[}}0, 1], [2], [3]] output_shape [2, 4, 16, 7] : memref<8x16x7xf32> into memref<2x4x16x7xf32>
// CHECK:         %[[O:.*]] = memref.expand_shape %arg2 {{\[\[}}0, 1], [2], [3]] output_shape [2, 4, 5, 7] : memref<8x5x7xf32> into memref<2x4x5x7xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[QM:.*]], #[[KM:.*]], #[[OM:.*]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:        ins(%[[Q]], %[[K]] : {{.*}}) outs(%[[O]] : memref<2x4x5x7xf32>)
func.func @qkv_heads(%qkv: memref<2x5x192xf32>, %kt: memref<8x16x7xf32>, %out: memref<8x5x7xf32>) {
  linalg.generic {indexing_maps = [#q, #k, #o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%qkv, %kt : memref<2x5x192xf32>, memref<8x16x7xf32>) outs(%out : memref<8x5x7xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  return
}

// GQA: 8 query heads share 2 KV heads, (d0 mod 8) floordiv 4; the cache's unit batch dimension,
// indexed by no loop, is dropped by a rank-reducing subview (no constant left in the maps).
// CHECK-LABEL: func.func @gqa
// CHECK:         %[[V:.*]] = memref.subview %arg1[0, 0, 0, 0] [1, 2, 9, 16] [1, 1, 1, 1] : memref<1x2x9x16xf32> to memref<2x9x16xf32, strided<[144, 16, 1]>>
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #[[VM:.*]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:        ins(%{{.*}}, %[[V]] : memref<2x4x1x9xf32>, memref<2x9x16xf32, strided<[144, 16, 1]>>)
func.func @gqa(%p: memref<8x1x9xf32>, %v: memref<1x2x9x16xf32>, %out: memref<8x1x16xf32>) {
  linalg.generic {indexing_maps = [#p, #v, #o], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %v : memref<8x1x9xf32>, memref<1x2x9x16xf32>) outs(%out : memref<8x1x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  return
}

// A linear index with a divisor (a collapsed view of a split one): (d0 floordiv 4) * 32 + d1 reads
// row d0_hi of the buffer expanded to 3 x 32.
// CHECK-LABEL: func.func @linear_index
// CHECK:         %[[R:.*]] = memref.expand_shape %arg0 {{\[\[}}0, 1]] output_shape [3, 32] : memref<96xf32> into memref<3x32xf32>
// CHECK:         %[[O:.*]] = memref.expand_shape %arg1 {{\[\[}}0, 1], [2]] output_shape [3, 4, 32] : memref<12x32xf32> into memref<3x4x32xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[R]] : memref<3x32xf32>) outs(%[[O]] : memref<3x4x32xf32>)
func.func @linear_index(%a: memref<96xf32>, %b: memref<12x32xf32>) {
  linalg.generic {indexing_maps = [#r, #y], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<96xf32>) outs(%b : memref<12x32xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  return
}

// A divisor that does not divide the loop's extent (10 by 3): left alone.
// CHECK-LABEL: func.func @not_exact
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:        ins(%arg0 : memref<4x5xf32>) outs(%arg1 : memref<10x5xf32>)
func.func @not_exact(%a: memref<4x5xf32>, %b: memref<10x5xf32>) {
  linalg.generic {indexing_maps = [#bad, #y], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x5xf32>) outs(%b : memref<10x5xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  return
}

// A sum of loops with equal coefficients is a window (here a pooling with a unit tap, h + kh): left to
// codegen-decompose-convolutions.
// CHECK-LABEL: func.func @window
// CHECK-NOT:     memref.expand_shape
// CHECK:         linalg.generic {{.*}} ins(%arg0, %arg1 : memref<1x4x8x8xf32>, memref<1x1xf32>)
func.func @window(%x: memref<1x4x8x8xf32>, %w: memref<1x1xf32>, %y: memref<1x4x8x8xf32>) {
  linalg.generic {indexing_maps = [#pin, #pk, #pout], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %w : memref<1x4x8x8xf32>, memref<1x1xf32>) outs(%y : memref<1x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.maximumf %a, %o : f32
    linalg.yield %m : f32
  }
  return
}

// A buffer with a dynamic layout cannot be viewed with static types: left alone.
// CHECK-LABEL: func.func @dynamic_layout
// CHECK-NOT:     memref.expand_shape
// CHECK:         linalg.generic {{.*}} outs(%arg1 : memref<12x5xf32, strided<[?, 1], offset: ?>>)
func.func @dynamic_layout(%a: memref<3x4x5xf32>, %b: memref<12x5xf32, strided<[?, 1], offset: ?>>) {
  linalg.generic {indexing_maps = [#x, #y], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<3x4x5xf32>) outs(%b : memref<12x5xf32, strided<[?, 1], offset: ?>>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  return
}
