// RUN: vt-opt %s --codegen-delinearize-loops | filecheck %s

// (@blocked_conv_batchnorm's maps, printed at the top of the module.)
// CHECK-DAG:   #[[BNWIN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d0, d4, d2 + d6, d3 + d7, d5)>
// CHECK-DAG:   #[[BNVAR:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7, d8) -> (d4, d5)>
// (@conv_channel_slice's, @conv_channel_shuffle's and @strided_pool's input maps.)
// CHECK-DAG:   #[[SLICE:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d3, d1 + d4, d2 + d5)>
// CHECK-DAG:   #[[STRIDED:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5)>
// (@unit_taps_window's input map: the taps' sums kept.)
// CHECK-DAG:   #[[UIN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6, d7) -> (d0, d1, d5, d3 + d6, d4 + d7)>

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
#uin = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (0, d6, (d2 + d4) floordiv 2, (d3 + d5) floordiv 2)>
#umean = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d6, 0, 0)>
#uw = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d6, d4, d5)>
#uout = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>
#sin = affine_map<(d0, d1, d2, d3) -> (d0, d1 * 48 + d2 + 32, d3)>
#sout = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

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

// A kernel of the NCHW8c layout reading an NCHW16c buffer (the layouts VTensor chose for two
// convolutions; the 8-channel block c splits at 16 / 8 = 2): the buffer's block dimension becomes (2, 8),
// the BatchNorm's vector, read at the same channel, (2, 2, 8), the output's channel blocks (2, 2).
// CHECK-LABEL: func.func @reblocked
// CHECK:         %[[X:.*]] = memref.expand_shape %arg0 {{\[\[}}0], [1], [2], [3], [4, 5]] output_shape [1, 2, 3, 3, 2, 8] : memref<1x2x3x3x16xf32> into memref<1x2x3x3x2x8xf32>
// CHECK:         %[[SV:.*]] = memref.subview %arg1[0, 0, 0] [32, 1, 1] [1, 1, 1]
// CHECK:         %[[V:.*]] = memref.expand_shape %[[SV]] {{\[\[}}0, 1, 2]] output_shape [2, 2, 8]
// CHECK:         %[[Y:.*]] = memref.expand_shape %arg2 {{\[\[}}0], [1, 2], [3], [4], [5]] output_shape [1, 2, 2, 3, 3, 8]
// CHECK:         linalg.generic {indexing_maps = [#[[RX:.*]], #[[RV:.*]], #[[RY:.*]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "parallel"]}
// CHECK-SAME:        ins(%[[X]], %[[V]] : memref<1x2x3x3x2x8xf32>, memref<2x2x8xf32>) outs(%[[Y]] : memref<1x2x2x3x3x8xf32>)
func.func @reblocked(%x: memref<1x2x3x3x16xf32>, %var: memref<32x1x1xf32>, %y: memref<1x4x3x3x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, c, h, w, cb) -> (n, (c * 8 + cb) floordiv 16, h, w, (c * 8 + cb) mod 16)>,
                                   affine_map<(n, c, h, w, cb) -> (((c * 8 + cb) floordiv 16) * 16 + (c * 8 + cb) mod 16, 0, 0)>,
                                   affine_map<(n, c, h, w, cb) -> (n, c, h, w, cb)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %var : memref<1x2x3x3x16xf32>, memref<32x1x1xf32>) outs(%y : memref<1x4x3x3x8xf32>) {
  ^bb0(%a: f32, %v: f32, %o: f32):
    %m = arith.mulf %a, %v : f32
    linalg.yield %m : f32
  }
  return
}

// Blocks of 12 read out of blocks of 16: 12 does not divide 16, the index carries: left alone.
// CHECK-LABEL: func.func @reblocked_carry
// CHECK-NOT:     memref.expand_shape
// CHECK:         linalg.generic {{.*}} ins(%arg0 : memref<1x3x3x3x16xf32>) outs(%arg1 : memref<1x4x3x3x12xf32>)
func.func @reblocked_carry(%x: memref<1x3x3x3x16xf32>, %y: memref<1x4x3x3x12xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, c, h, w, cb) -> (n, (c * 12 + cb) floordiv 16, h, w, (c * 12 + cb) mod 16)>,
                                   affine_map<(n, c, h, w, cb) -> (n, c, h, w, cb)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<1x3x3x3x16xf32>) outs(%y : memref<1x4x3x3x12xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
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

// A blocked (NCHW16c) 1x1 convolution with a BatchNorm fused into its input, as the importer and
// VTC make it: the window (h + kh, w + kw) and its loops stay for codegen-decompose-convolutions; the
// BatchNorm's per-channel vectors, read at the linear index c * 16 + cb, become 2 x 16 views (c, cb),
// so that codegen-split-checks can move the assert out and codegen-split-prologues the normalisation.
// CHECK-LABEL: func.func @blocked_conv_batchnorm
// CHECK:         %[[SV:.*]] = memref.subview %arg1[0, 0, 0] [32, 1, 1] [1, 1, 1] : memref<32x1x1xf32> to memref<32xf32, strided<[1]>>
// CHECK:         %[[V:.*]] = memref.expand_shape %[[SV]] {{\[\[}}0, 1]] output_shape [2, 16] : memref<32xf32, strided<[1]>> into memref<2x16xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[BNWIN]], #[[BNVAR]], #{{map[0-9]*}}, #{{map[0-9]*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction", "parallel"]}
// CHECK-SAME:        ins(%arg0, %[[V]], %arg2 : memref<1x2x8x8x16xf32>, memref<2x16xf32>, memref<3x2x1x1x16x16xf32>) outs(%arg3 : memref<1x3x8x8x16xf32>)
// CHECK:           cf.assert
func.func @blocked_conv_batchnorm(%x: memref<1x2x8x8x16xf32>, %var: memref<32x1x1xf32>, %w: memref<3x2x1x1x16x16xf32>, %y: memref<1x3x8x8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(n, k, h, w, c, cb, kh, kw, kb) -> (n, c, h + kh, w + kw, cb)>,
                                   affine_map<(n, k, h, w, c, cb, kh, kw, kb) -> (c * 16 + cb, 0, 0)>,
                                   affine_map<(n, k, h, w, c, cb, kh, kw, kb) -> (k, c, kh, kw, cb, kb)>,
                                   affine_map<(n, k, h, w, c, cb, kh, kw, kb) -> (n, k, h, w, kb)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction", "parallel"]}
      ins(%x, %var, %w : memref<1x2x8x8x16xf32>, memref<32x1x1xf32>, memref<3x2x1x1x16x16xf32>) outs(%y : memref<1x3x8x8x16xf32>) {
  ^bb0(%a: f32, %v: f32, %b: f32, %o: f32):
    %s = math.sqrt %v : f32
    %nz = arith.cmpf one, %s, %zero : f32
    cf.assert %nz, "unimplemented: tensor with zero element"
    %n = arith.divf %a, %s : f32
    %m = arith.mulf %n, %b : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  }
  return
}

// ShuffleNet's 1x1 convolution (NCHW in, NHWC out) reading the second half of the channels
// (torch.chunk): the slice c + 8 becomes a subview at channel 8; the window h + kh stays.
// CHECK-LABEL: func.func @conv_channel_slice
// CHECK:         %[[S:.*]] = memref.subview %arg0[0, 8, 0, 0] [2, 8, 6, 6] [1, 1, 1, 1] : memref<2x16x6x6xf32> to memref<2x8x6x6xf32, strided<[576, 36, 6, 1], offset: 288>>
// CHECK:         linalg.generic {indexing_maps = [#[[SLICE]], #{{map[0-9]*}}, #{{map[0-9]*}}]
// CHECK-SAME:        ins(%[[S]], %arg1 : {{.*}}) outs(%arg2 : memref<2x6x6x4xf32>)
func.func @conv_channel_slice(%x: memref<2x16x6x6xf32>, %w: memref<1x1x8x4xf32>, %y: memref<2x6x6x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, h, w, c, kh, kw, f) -> (n, c + 8, h + kh, w + kw)>,
                                   affine_map<(n, h, w, c, kh, kw, f) -> (kh, kw, c, f)>,
                                   affine_map<(n, h, w, c, kh, kw, f) -> (n, h, w, f)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel"]}
      ins(%x, %w : memref<2x16x6x6xf32>, memref<1x1x8x4xf32>) outs(%y : memref<2x6x6x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// ... and after a channel shuffle folded into its input, channel c of the shuffled tensor being
// (c floordiv 2 + 4, c mod 2) of the viewed [8, 2] channels: those two dimensions are one
// contiguous dimension, so the read is channel c + 8 of it (a collapse, then a subview at 8), and
// the reduction keeps its one loop c (split into (4, 2) it made the CPU's product two loops, 2x
// slower than reading a copy).
// CHECK-LABEL: func.func @conv_channel_shuffle
// CHECK:         %[[C:.*]] = memref.collapse_shape %arg0 {{\[\[}}0], [1, 2], [3], [4]] : memref<2x8x2x6x6xf32> into memref<2x16x6x6xf32>
// CHECK:         %[[S:.*]] = memref.subview %[[C]][0, 8, 0, 0] [2, 8, 6, 6] [1, 1, 1, 1]
// CHECK:         linalg.generic {indexing_maps = [#[[SLICE]], #{{map[0-9]*}}, #{{map[0-9]*}}], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel"]}
// CHECK-SAME:        ins(%[[S]], %arg1 : {{.*}}) outs(%arg2 : memref<2x6x6x4xf32>)
func.func @conv_channel_shuffle(%x: memref<2x8x2x6x6xf32>, %w: memref<1x1x8x4xf32>, %y: memref<2x6x6x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, h, w, c, kh, kw, f) -> (n, c floordiv 2 + 4, c mod 2, h + kh, w + kw)>,
                                   affine_map<(n, h, w, c, kh, kw, f) -> (kh, kw, c, f)>,
                                   affine_map<(n, h, w, c, kh, kw, f) -> (n, h, w, f)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "parallel"]}
      ins(%x, %w : memref<2x8x2x6x6xf32>, memref<1x1x8x4xf32>) outs(%y : memref<2x6x6x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// A strided window 2 * h + kh is a row-major linear form too, but it combines an output position
// (parallel) with a tap (reduction): a window, left as it is.
// CHECK-LABEL: func.func @strided_pool
// CHECK-NOT:     memref.expand_shape
// CHECK:         linalg.generic {indexing_maps = [#[[STRIDED]], #{{map[0-9]*}}, #{{map[0-9]*}}]
// CHECK-SAME:        ins(%arg0, %arg1 : memref<1x4x8x8xf32>, memref<2x2xf32>)
func.func @strided_pool(%x: memref<1x4x8x8xf32>, %k: memref<2x2xf32>, %y: memref<1x4x4x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, c, h, w, kh, kw) -> (n, c, 2 * h + kh, 2 * w + kw)>,
                                   affine_map<(n, c, h, w, kh, kw) -> (kh, kw)>,
                                   affine_map<(n, c, h, w, kh, kw) -> (n, c, h, w)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %k : memref<1x4x8x8xf32>, memref<2x2xf32>) outs(%y : memref<1x4x4x4xf32>) {
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

// A TeMCO group's 1x1 fconv reading its upsampled tile (UNet's decoder: `(h + kh) floordiv 2`,
// `(w + kw) floordiv 2` over a tile of two output rows, kh and kw of extent 1) and writing a tile
// of the group's output, a subview at the tile's row: the dynamic offset carries over to the
// expanded view. w splits into (4, 2); the tile's unit row and batch dimensions are dropped.
// CHECK-LABEL: func.func @upsampled_tile
// CHECK:         %[[X:.*]] = memref.subview %arg0[0, 0, 0, 0] [1, 16, 1, 4] [1, 1, 1, 1] : memref<1x16x1x4xf32> to memref<16x4xf32, strided<[4, 1]>>
// CHECK:         %[[O:.*]] = memref.expand_shape %{{.*}} {{\[\[}}0], [1], [2], [3, 4]] output_shape [1, 4, 2, 4, 2] : memref<1x4x2x8xf32, strided<[256, 64, 8, 1], offset: ?>> into memref<1x4x2x4x2xf32, strided<[256, 64, 8, 2, 1], offset: ?>>
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]
// CHECK-SAME:        ins(%[[X]], {{.*}}) outs(%[[O]] : memref<1x4x2x4x2xf32, strided<[256, 64, 8, 2, 1], offset: ?>>)
func.func @upsampled_tile(%x: memref<1x16x1x4xf32>, %mean: memref<16x1x1xf32>, %w: memref<4x16x1x1xf32>, %out: memref<1x4x8x8xf32>, %row: index) {
  %zero = arith.constant 0.0 : f32
  %tile = memref.subview %out[0, 0, %row, 0] [1, 4, 2, 8] [1, 1, 1, 1] : memref<1x4x8x8xf32> to memref<1x4x2x8xf32, strided<[256, 64, 8, 1], offset: ?>>
  linalg.generic {indexing_maps = [#uin, #umean, #uw, #uout], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %mean, %w : memref<1x16x1x4xf32>, memref<16x1x1xf32>, memref<4x16x1x1xf32>) outs(%tile : memref<1x4x2x8xf32, strided<[256, 64, 8, 1], offset: ?>>) {
  ^bb0(%a: f32, %m: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %m : f32
    %c = arith.cmpf ugt, %s, %zero : f32
    %r = arith.select %c, %s, %zero : f32
    %p = arith.mulf %r, %b : f32
    %t = arith.addf %o, %p : f32
    linalg.yield %t : f32
  }
  return
}

// A strided slice of a VTC view (EfficientViT's multi-scale q, k, v in f16 on CUDA: each of 8 heads
// reads 16 of every 48 channels, from channel 32 on): the channel dimension is expanded into its
// radices (8, 48) and each digit sliced (heads 0..8, channels 32..48), so the map is one loop per
// dimension; the trailing dimension keeps its own loop.
// CHECK-LABEL: func.func @strided_slice
// CHECK:         %[[E:.*]] = memref.expand_shape %arg0 {{\[\[}}0], [1, 2], [3]] output_shape [1, 8, 48, 8] : memref<1x384x8xf32> into memref<1x8x48x8xf32>
// CHECK:         %[[S:.*]] = memref.subview %[[E]][0, 0, 32, 0] [1, 8, 16, 8] [1, 1, 1, 1] : memref<1x8x48x8xf32> to memref<1x8x16x8xf32, strided<[3072, 384, 8, 1], offset: 256>>
// CHECK:         linalg.generic {indexing_maps = [#[[ID:map[0-9]*]], #[[ID]]]
// CHECK-SAME:        ins(%[[S]] : memref<1x8x16x8xf32, strided<[3072, 384, 8, 1], offset: 256>>)
func.func @strided_slice(%x: memref<1x384x8xf32>, %y: memref<1x8x16x8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#sin, #sout], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<1x384x8xf32>) outs(%y : memref<1x8x16x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %zero : f32
    linalg.yield %r : f32
  }
  return
}

// A grouped 1x1 convolution written into a concat slice over merged loops (channels 12 x 16 and
// pixels 4 x 4 merged): its input reads `p floordiv 4 + kh` with the filter's unit taps kh, kw. A
// parallel and a reduction loop with the same coefficient slide a window, so the tap sums stay
// (`h + kh`) for codegen-decompose-convolutions; read as the digits of a view (`h * 1 + kh`) the
// convolution became a contraction per output row.
// CHECK-LABEL: func.func @unit_taps_window
// CHECK:         linalg.generic {indexing_maps = [#[[UIN]], #{{.*}}, #{{.*}}]
// CHECK-SAME:        ins(%{{.*}}, %{{.*}} : memref<2x12x16x4x4xf32>, memref<12x16x16x1x1xf32>)
func.func @unit_taps_window(%x: memref<2x12x16x4x4xf32>, %w: memref<12x16x16x1x1xf32>, %y: memref<2x192x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1 floordiv 16, d3, d2 floordiv 4 + d4, d2 mod 4 + d5)>,
                                   affine_map<(d0, d1, d2, d3, d4, d5) -> (d1 floordiv 16, d1 mod 16, d3, d4, d5)>,
                                   affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w : memref<2x12x16x4x4xf32>, memref<12x16x16x1x1xf32>) outs(%y : memref<2x192x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  }
  return
}

// Row 0 of a [3, 12] array read through a view at `(d1 floordiv 12, d1 mod 12)` (`x[-3].expand(1,
// 12)`): the two dimensions merge into one, cut to the loop's 12 (linalg's verifier demands a plain
// loop's extent; over the whole collapsed 36 the kernel did not verify).
// CHECK-LABEL: func.func @merged_row
// CHECK:         %[[FLAT:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1]] : memref<3x12xi64> into memref<36xi64>
// CHECK-NEXT:    %[[ROW:.*]] = memref.subview %[[FLAT]][0] [12] [1] : memref<36xi64> to memref<12xi64, strided<[1]>>
// CHECK-NEXT:    linalg.generic
// CHECK-SAME:        ins(%[[ROW]] : memref<12xi64, strided<[1]>>)
func.func @merged_row(%x: memref<3x12xi64>, %y: memref<1x12xi64>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1 floordiv 12, d1 mod 12)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<3x12xi64>) outs(%y : memref<1x12xi64>) {
  ^bb0(%a: i64, %b: i64):
    linalg.yield %a : i64
  }
  return
}
