// RUN: vt-opt %s --codegen-order-window-taps | filecheck %s

// (The maps, printed at the top of the module: the two convolutions' after the pass, the projection's as it was.)
// CHECK-DAG:   #[[CIN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d6 mod 3, d2 * 2 + d4, d3 * 2 + d5)>
// CHECK-DAG:   #[[CW:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d6, d4, d5)>
// CHECK-DAG:   #[[COUT:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3)>
// CHECK-DAG:   #[[IN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d6, d2 + d4, d3 + d5)>
// CHECK-DAG:   #[[RW:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d3 * 16 + d2)>

#vin = affine_map<(n, f, h, w, c, kh, kw) -> (n, c mod 3, h * 2 + kh, w * 2 + kw)>
#wt = affine_map<(n, f, h, w, c, kh, kw) -> (f, c, kh, kw)>
#out = affine_map<(n, f, h, w, c, kh, kw) -> (n, f, h, w)>
#in = affine_map<(n, f, h, w, c, kh, kw) -> (n, c, h + kh, w + kw)>
#pin = affine_map<(n, c, h, w, kh, kw) -> (n, c, h * 2 + kh, w * 2 + kw)>
#pk = affine_map<(n, c, h, w, kh, kw) -> (kh, kw)>
#pout = affine_map<(n, c, h, w, kh, kw) -> (n, c, h, w)>
#ra = affine_map<(s, e, d, h) -> (h, s, d)>
#rw = affine_map<(s, e, d, h) -> (e, h * 16 + d)>
#ro = affine_map<(s, e, d, h) -> (s, e)>
#tin = affine_map<(n, f, h, w, kh, kw, c) -> (n, c, h + kh, w + kw)>
#twt = affine_map<(n, f, h, w, kh, kw, c) -> (f, c, kh, kw)>
#tout = affine_map<(n, f, h, w, kh, kw, c) -> (n, f, h, w)>

// A 3x3 stride-2 convolution reading a concat buffer of x with itself through a folded VTC view
// (channel c of 6 is x's c mod 3): no linalg convolution. Its reductions (c, kh, kw) become
// (kh, kw, c) -- the order im2col sums in -- and the parallel loops stay where they were.
// CHECK-LABEL: func.func @concat_view_conv
// CHECK:         linalg.generic {indexing_maps = [#[[CIN]], #[[CW]], #[[COUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
// CHECK-NOT:     linalg.memoized_indexing_maps
func.func @concat_view_conv(%x: memref<1x3x4x4xf32>, %f: memref<2x6x3x3xf32>, %y: memref<1x2x1x1xf32>) {
  linalg.generic {indexing_maps = [#vin, #wt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %f : memref<1x3x4x4xf32>, memref<2x6x3x3xf32>) outs(%y : memref<1x2x1x1xf32>)
      attrs = {linalg.memoized_indexing_maps = [#vin, #wt, #out]} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// linalg's own convolution (channels first) is ordered alike, so both routes agree; a body that
// reads a loop index reads the same loop at its new place (kh: d5 -> d4).
// CHECK-LABEL: func.func @conv_index
// CHECK:         linalg.generic {indexing_maps = [#[[IN]], #[[CW]], #[[COUT]]]
// CHECK:           linalg.index 4 : index
func.func @conv_index(%x: memref<1x6x6x6xf32>, %f: memref<2x6x3x3xf32>, %y: memref<1x2x4x4xf32>) {
  linalg.generic {indexing_maps = [#in, #wt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %f : memref<1x6x6x6xf32>, memref<2x6x3x3xf32>) outs(%y : memref<1x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %i = linalg.index 5 : index
    %j = arith.index_cast %i : index to i32
    %k = arith.sitofp %j : i32 to f32
    %m = arith.mulf %a, %b : f32
    %n = arith.mulf %m, %k : f32
    %s = arith.addf %o, %n : f32
    linalg.yield %s : f32
  }
  return
}

// Left alone: a pooling (its reductions are all taps), a contraction over a folded view whose
// linear index mixes two reductions (an attention output projection reading heads x head_dim as
// `h * 16 + d`: no output loop in it, no window), and a convolution whose taps are already outer.
// CHECK-LABEL: func.func @left_alone
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #[[RW]], #{{.*}}], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
// CHECK:         linalg.generic {indexing_maps = [#[[IN]], #[[CW]], #[[COUT]]]
func.func @left_alone(%x: memref<1x3x6x6xf32>, %win: memref<2x2xf32>, %p: memref<1x3x3x3xf32>,
                      %ra: memref<2x5x16xf32>, %rw: memref<8x32xf32>, %ro: memref<5x8xf32>,
                      %cx: memref<1x6x6x6xf32>, %cf: memref<2x6x3x3xf32>, %cy: memref<1x2x4x4xf32>) {
  linalg.generic {indexing_maps = [#pin, #pk, #pout],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %win : memref<1x3x6x6xf32>, memref<2x2xf32>) outs(%p : memref<1x3x3x3xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.maximumf %o, %a : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#ra, #rw, #ro], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%ra, %rw : memref<2x5x16xf32>, memref<8x32xf32>) outs(%ro : memref<5x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %t = arith.addf %o, %m : f32
    linalg.yield %t : f32
  }
  linalg.generic {indexing_maps = [#tin, #twt, #tout],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%cx, %cf : memref<1x6x6x6xf32>, memref<2x6x3x3xf32>) outs(%cy : memref<1x2x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %t = arith.addf %o, %m : f32
    linalg.yield %t : f32
  }
  return
}
