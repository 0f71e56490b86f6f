// RUN: vt-opt %s --pass-pipeline='builtin.module(codegen-decompose-convolutions{threads=1})' | filecheck %s
// RUN: vt-opt %s --pass-pipeline='builtin.module(codegen-decompose-convolutions{threads=2})' | filecheck %s --check-prefix=PAR
// RUN: vt-opt %s --pass-pipeline='builtin.module(codegen-decompose-convolutions{threads=2}, codegen-attach-schedule{threads=2 vector-bits=256}, transform-interpreter, codegen-erase-schedule, canonicalize, codegen-hoist-static-allocas)' | filecheck %s --check-prefix=TILES

#in = affine_map<(n, f, h, w, c, kh, kw) -> (n, c, h * 2 + kh, w * 2 + kw)>
#wt = affine_map<(n, f, h, w, c, kh, kw) -> (f, c, kh, kw)>
#out = affine_map<(n, f, h, w, c, kh, kw) -> (n, f, h, w)>
#in1 = affine_map<(n, f, h, w, c, kh, kw) -> (n, c, h + kh, w + kw)>
#din = affine_map<(n, h, w, c, kh, kw) -> (n, c, h + kh, w + kw)>
#dw = affine_map<(n, h, w, c, kh, kw) -> (c, kh, kw)>
#dout = affine_map<(n, h, w, c, kh, kw) -> (n, c, h, w)>

// A filter computed at run time (here: an argument) keeps the per-tap decomposition.
// A 3x3 stride-2 convolution: one loop per filter dimension; inside, per tap, the same product over
// (n, f, h, w, c) reading a strided subview of the input shifted by the tap and the tap's filter slice
// (rank-reduced): a contraction with projected-permutation maps.
// CHECK-DAG:   #[[IN:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2, d3)>
// CHECK-DAG:   #[[W:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4)>
// CHECK-DAG:   #[[OUT:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-DAG:   #[[DIN:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG:   #[[DW:.*]] = affine_map<(d0, d1, d2, d3) -> (d1)>
// CHECK-LABEL: func.func @conv
// CHECK:         scf.for %[[KH:.*]] = %{{.*}} to %{{.*}} step
// CHECK:           scf.for %[[KW:.*]] = %{{.*}} to %{{.*}} step
// CHECK:             %[[X:.*]] = memref.subview %{{.*}}[0, 0, %[[KH]], %[[KW]]] [1, 4, 4, 4] [1, 1, 2, 2]
// CHECK:             %[[F:.*]] = memref.subview %{{.*}}[0, 0, %[[KH]], %[[KW]]] [8, 4, 1, 1] [1, 1, 1, 1] : memref<8x4x3x3xf32> to memref<8x4xf32, strided<[36, 9], offset: ?>>
// CHECK:             linalg.generic {indexing_maps = [#[[IN]], #[[W]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[X]], %[[F]]
func.func @conv(%x: memref<1x4x9x9xf32>, %f: memref<8x4x3x3xf32>, %y: memref<1x8x4x4xf32>) {
  linalg.generic {indexing_maps = [#in, #wt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %f : memref<1x4x9x9xf32>, memref<8x4x3x3xf32>) outs(%y : memref<1x8x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// With a constant filter: im2col in panels of 4 output rows (4 x 32 = 128 pixels). The filter is
// re-laid out [f, kh, kw, c] at compile time; per image and panel, a copy kernel per tap fills the
// stack panel [kh, kw, c, rows, ow], and one contraction [8 x 36] x [36 x 128] writes the panel's rows.
// CHECK-LABEL: func.func @im2col
// CHECK:         memref.alloca_scope
// CHECK:           %[[W:.*]] = memref.get_global @filter_im2col : memref<8x3x3x4xf32>
// CHECK:           %[[A:.*]] = memref.collapse_shape %[[W]] {{\[\[}}0], [1, 2, 3]] : memref<8x3x3x4xf32> into memref<8x36xf32>
// CHECK:           %[[P:.*]] = memref.alloca() {alignment = 64 : i64} : memref<3x3x4x4x32xf32>
// CHECK:           %[[B:.*]] = memref.collapse_shape %[[P]] {{\[\[}}0, 1, 2], [3, 4]] : memref<3x3x4x4x32xf32> into memref<36x128xf32>
// CHECK:           scf.for %[[N:.*]] = %{{.*}} to %{{.*}} step
// CHECK:             scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step
// CHECK:               scf.for %[[KH:.*]] = %{{.*}} to %{{.*}} step
// CHECK:                 scf.for %[[KW:.*]] = %{{.*}} to %{{.*}} step
// CHECK:                   %[[X:.*]] = memref.subview %{{.*}}[%[[N]], 0, %{{.*}}, %[[KW]]] [1, 4, 4, 32] [1, 1, 2, 2]
// CHECK:                   %[[T:.*]] = memref.subview %[[P]][%[[KH]], %[[KW]], 0, 0, 0] [1, 1, 4, 4, 32] [1, 1, 1, 1, 1]
// CHECK:                   linalg.generic {{.*}} ins(%[[X]] : {{.*}}) outs(%[[T]] : {{.*}})
// CHECK:               %[[Y:.*]] = memref.subview %{{.*}}[%[[N]], 0, %{{.*}}, 0] [1, 8, 4, 32] [1, 1, 1, 1]
// CHECK:               %[[C:.*]] = memref.collapse_shape %[[Y]] {{\[\[}}0], [1, 2]]
// CHECK:               linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[B]], %[[A]] : memref<36x128xf32>, memref<8x36xf32>) outs(%[[C]] :
// CHECK-NOT:   memref.global "private" constant @filter :
memref.global "private" constant @filter : memref<8x4x3x3xf32> = dense<1.0>
func.func @im2col(%x: memref<2x4x65x65xf32>, %y: memref<2x8x32x32xf32>) {
  %f = memref.get_global @filter : memref<8x4x3x3xf32>
  linalg.generic {indexing_maps = [#in, #wt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %f : memref<2x4x65x65xf32>, memref<8x4x3x3xf32>) outs(%y : memref<2x8x32x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// On two threads the same convolution's 2 images x 8 panels are one parallel loop (16 iterations,
// 8 per thread): each iteration fills a panel of its own, allocated in the loop's body, and runs its
// copies and its contraction alone. The sums are those of the sequential loops: bitwise any thread count.
// PAR-LABEL: func.func @im2col
// PAR-NOT:       memref.alloca_scope
// PAR:           %[[W:.*]] = memref.get_global @filter_im2col : memref<8x3x3x4xf32>
// PAR:           %[[A:.*]] = memref.collapse_shape %[[W]] {{\[\[}}0], [1, 2, 3]] : memref<8x3x3x4xf32> into memref<8x36xf32>
// PAR:           scf.forall (%[[N:.*]], %[[R:.*]]) in (2, 8) {
// PAR-NEXT:        %[[P:.*]] = memref.alloca() {alignment = 64 : i64} : memref<3x3x4x4x32xf32>
// PAR-NEXT:        %[[B:.*]] = memref.collapse_shape %[[P]] {{\[\[}}0, 1, 2], [3, 4]] : memref<3x3x4x4x32xf32> into memref<36x128xf32>
// PAR:             scf.for %[[KH:.*]] = %{{.*}} to %{{.*}} step
// PAR:               scf.for %[[KW:.*]] = %{{.*}} to %{{.*}} step
// PAR:                 %[[X:.*]] = memref.subview %{{.*}}[%[[N]], 0, %{{.*}}, %[[KW]]] [1, 4, 4, 32] [1, 1, 2, 2]
// PAR:                 %[[T:.*]] = memref.subview %[[P]][%[[KH]], %[[KW]], 0, 0, 0] [1, 1, 4, 4, 32] [1, 1, 1, 1, 1]
// PAR:                 linalg.generic {{.*}} ins(%[[X]] : {{.*}}) outs(%[[T]] : {{.*}})
// PAR:             %[[Y:.*]] = memref.subview %{{.*}}[%[[N]], 0, %{{.*}}, 0] [1, 8, 4, 32] [1, 1, 1, 1]
// PAR:             %[[C:.*]] = memref.collapse_shape %[[Y]] {{\[\[}}0], [1, 2]]
// PAR:             linalg.generic {{.*}} ins(%[[B]], %[[A]] : memref<36x128xf32>, memref<8x36xf32>) outs(%[[C]] :

// Scheduled: the kernels in the parallel loop are tiled by sequential loops (no nested forall: it
// would fork a nested team per panel) and vectorised; the packed buffers of the contraction and the
// panel stay in the parallel loop's body, in an alloca scope (per thread; hoisted out of it they
// would be shared by the threads).
// TILES-LABEL: func.func @im2col
// TILES:         scf.forall (%{{.*}}, %{{.*}}) in (2, 8) {
// TILES-NEXT:      memref.alloca_scope {
// TILES-DAG:         memref.alloca() {alignment = 64 : i64} : memref<{{[0-9]+}}xi8>
// TILES-DAG:         memref.alloca() {alignment = 64 : i64} : memref<3x3x4x4x32xf32>
// TILES-NOT:         scf.forall
// TILES:             vector.transfer_write {{.*}} : vector<32xf32>, memref<3x3x4x4x32xf32>
// TILES-NOT:         scf.forall
// TILES:             vector.transfer_write {{.*}} : vector<6x16xf32>, memref<8x128xf32, strided<[1024, 1], offset: ?>>
// TILES-NOT:         scf.forall
// TILES-LABEL: func.func @im2col_one_image

// One image whose one panel (8 rows of 8 pixels) would leave a thread idle: panels of 4 rows (32
// pixels), one per thread.
// PAR-LABEL: func.func @im2col_one_image
// PAR:           scf.forall (%{{.*}}, %{{.*}}) in (1, 2) {
// PAR-NEXT:        memref.alloca() {alignment = 64 : i64} : memref<3x3x16x4x8xf32>
memref.global "private" constant @narrow : memref<8x16x3x3xf32> = dense<1.0>
func.func @im2col_one_image(%x: memref<1x16x10x10xf32>, %y: memref<1x8x8x8xf32>) {
  %f = memref.get_global @narrow : memref<8x16x3x3xf32>
  linalg.generic {indexing_maps = [#in1, #wt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %f : memref<1x16x10x10xf32>, memref<8x16x3x3xf32>) outs(%y : memref<1x8x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// A panel over 2 MiB (K = 3x3x512, 8 rows of 16 pixels: 2.25 MiB) would not fit a thread's stack
// beside its packed buffers: panels of 4 rows (1.1 MiB), 8 over the 2 images.
// PAR-LABEL: func.func @im2col_large_panel
// PAR:           scf.forall (%{{.*}}, %{{.*}}) in (2, 4) {
// PAR-NEXT:        memref.alloca() {alignment = 64 : i64} : memref<3x3x512x4x16xf32>

// No panel of 32 pixels or more fits (K = 3x3x2048: 4 rows of 8 pixels take 2.25 MiB): sequential image
// and panel loops (on the calling thread's stack), whose contraction the schedule splits over the
// threads instead.
// PAR-LABEL: func.func @im2col_huge_panel
// PAR:           memref.alloca_scope
// PAR:             memref.alloca() {alignment = 64 : i64} : memref<3x3x2048x8x8xf32>
// PAR:             scf.for
// PAR:               scf.for
// PAR-NOT:       scf.forall
// PAR-LABEL: func.func @pointwise
memref.global "private" constant @wide : memref<8x512x3x3xf32> = dense<1.0>
func.func @im2col_large_panel(%x: memref<2x512x18x18xf32>, %y: memref<2x8x16x16xf32>) {
  %f = memref.get_global @wide : memref<8x512x3x3xf32>
  linalg.generic {indexing_maps = [#in1, #wt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %f : memref<2x512x18x18xf32>, memref<8x512x3x3xf32>) outs(%y : memref<2x8x16x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

memref.global "private" constant @wider : memref<8x2048x3x3xf32> = dense<1.0>
func.func @im2col_huge_panel(%x: memref<2x2048x10x10xf32>, %y: memref<2x8x8x8xf32>) {
  %f = memref.get_global @wider : memref<8x2048x3x3xf32>
  linalg.generic {indexing_maps = [#in1, #wt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %f : memref<2x2048x10x10xf32>, memref<8x2048x3x3xf32>) outs(%y : memref<2x8x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// A 1x1 stride-1 convolution reads its contiguous input as the matrix [c, h*w]: no copy.
// CHECK-LABEL: func.func @pointwise
// CHECK-NOT:     memref.alloca
// CHECK:         %[[X:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0], [1], [2, 3]] : memref<2x4x6x6xf32> into memref<2x4x36xf32>
// CHECK:         %[[W:.*]] = memref.get_global @pw_im2col : memref<8x4xf32>
// CHECK:         %[[Y:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0], [1], [2, 3]] : memref<2x8x6x6xf32> into memref<2x8x36xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[X]], %[[W]] : memref<2x4x36xf32>, memref<8x4xf32>) outs(%[[Y]] : memref<2x8x36xf32>)
// CHECK-NOT:     scf.for
memref.global "private" constant @pw : memref<8x4x1x1xf32> = dense<2.0>
func.func @pointwise(%x: memref<2x4x6x6xf32>, %y: memref<2x8x6x6xf32>) {
  %f = memref.get_global @pw : memref<8x4x1x1xf32>
  linalg.generic {indexing_maps = [#in1, #wt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %f : memref<2x4x6x6xf32>, memref<8x4x1x1xf32>) outs(%y : memref<2x8x6x6xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// Over a 1x1 image the product is a Linear layer over the batch, out[n, f] += x[n, c] * W[f, c]: no
// pixel dimension (the vectors would run along it, one element long), the image dimensions dropped
// by rank-reducing subviews.
// CHECK-LABEL: func.func @pointwise_unit_image
// CHECK:         %[[X:.*]] = memref.subview %{{.*}}[0, 0, 0, 0] [2, 4, 1, 1] [1, 1, 1, 1] : memref<2x4x1x1xf32> to memref<2x4xf32, strided<[4, 1]>>
// CHECK:         %[[W:.*]] = memref.get_global @pw_im2col{{.*}} : memref<8x4xf32>
// CHECK:         %[[Y:.*]] = memref.subview %{{.*}}[0, 0, 0, 0] [2, 8, 1, 1] [1, 1, 1, 1] : memref<2x8x1x1xf32> to memref<2x8xf32, strided<[8, 1]>>
// CHECK:         linalg.generic {indexing_maps = [#[[A:.*]], #[[B:.*]], #[[C:.*]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[W]] : {{.*}}) outs(%[[Y]] : {{.*}})
func.func @pointwise_unit_image(%x: memref<2x4x1x1xf32>, %y: memref<2x8x1x1xf32>) {
  %f = memref.get_global @pw : memref<8x4x1x1xf32>
  linalg.generic {indexing_maps = [#in1, #wt, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %f : memref<2x4x1x1xf32>, memref<8x4x1x1xf32>) outs(%y : memref<2x8x1x1xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// A depthwise convolution (no channel reduction) in NCHW: one elementwise kernel over the output,
// looping in the output's order (n, c, h, w), that reads each of the 2x2 taps through its own shifted
// subview and filter slice and applies the body once per tap in the window's order (kh, kw).
// CHECK-LABEL: func.func @depthwise
// CHECK-NOT:     scf.for
// CHECK:         %[[T0:.*]] = memref.subview %[[X:.*]][0, 0, 0, 0] [2, 4, 4, 4] [1, 1, 1, 1]
// CHECK:         %[[T1:.*]] = memref.subview %[[X]][0, 0, 0, 1] [2, 4, 4, 4] [1, 1, 1, 1]
// CHECK:         %[[T2:.*]] = memref.subview %[[X]][0, 0, 1, 0] [2, 4, 4, 4] [1, 1, 1, 1]
// CHECK:         %[[T3:.*]] = memref.subview %[[X]][0, 0, 1, 1] [2, 4, 4, 4] [1, 1, 1, 1]
// CHECK:         %[[F0:.*]] = memref.subview %[[F:.*]][0, 0, 0] [4, 1, 1] [1, 1, 1] : memref<4x2x2xf32> to memref<4xf32, strided<[4]>>
// CHECK:         %[[F3:.*]] = memref.subview %[[F]][0, 1, 1] [4, 1, 1] [1, 1, 1] : memref<4x2x2xf32> to memref<4xf32, strided<[4], offset: 3>>
// CHECK:         linalg.generic {indexing_maps = [#[[DIN]], #[[DIN]], #[[DIN]], #[[DIN]], #[[DW]], #[[DW]], #[[DW]], #[[DW]], #[[DIN]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[T0]], %[[T1]], %[[T2]], %[[T3]], %[[F0]], %{{.*}}, %{{.*}}, %[[F3]] :
// CHECK:         ^bb0(%[[X0:.*]]: f32, %[[X1:.*]]: f32, %[[X2:.*]]: f32, %[[X3:.*]]: f32, %[[W0:.*]]: f32, %[[W1:.*]]: f32, %[[W2:.*]]: f32, %[[W3:.*]]: f32, %[[O:.*]]: f32):
// CHECK:           %[[M0:.*]] = arith.mulf %[[X0]], %[[W0]]
// CHECK:           %[[S0:.*]] = arith.addf %[[O]], %[[M0]]
// CHECK:           %[[M1:.*]] = arith.mulf %[[X1]], %[[W1]]
// CHECK:           %[[S1:.*]] = arith.addf %[[S0]], %[[M1]]
// CHECK:           %[[M2:.*]] = arith.mulf %[[X2]], %[[W2]]
// CHECK:           %[[S2:.*]] = arith.addf %[[S1]], %[[M2]]
// CHECK:           %[[M3:.*]] = arith.mulf %[[X3]], %[[W3]]
// CHECK:           %[[S3:.*]] = arith.addf %[[S2]], %[[M3]]
// CHECK:           linalg.yield %[[S3]] : f32
func.func @depthwise(%x: memref<2x4x5x5xf32>, %f: memref<4x2x2xf32>, %y: memref<2x4x4x4xf32>) {
  linalg.generic {indexing_maps = [#din, #dw, #dout],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %f : memref<2x4x5x5xf32>, memref<4x2x2xf32>) outs(%y : memref<2x4x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}

// A padded input (filled with zeros, its interior written by one kernel, read by the convolution
// alone) is staged one plane at a time: per image and channel a stack plane is filled and its
// interior copied from the producer's buffer, which the producer now writes without the padding
// (a copy of an argument goes: the planes read the argument). No kernel touches the padded buffer.
// CHECK-LABEL: func.func @depthwise_padded
// CHECK-SAME:    (%[[X:[a-z0-9]+]]: memref<2x4x4x4xf32>
// CHECK-NOT:     memref.alloc()
// CHECK:         memref.alloca_scope
// CHECK:           scf.for %[[N:.*]] = %{{.*}} to %{{.*}}
// CHECK:             scf.for %[[C:.*]] = %{{.*}} to %{{.*}}
// CHECK:               %[[PLANE:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x1x6x6xf32>
// CHECK:               linalg.fill ins(%{{.*}} : f32) outs(%[[PLANE]] : memref<1x1x6x6xf32>)
// CHECK:               %[[IN:.*]] = memref.subview %[[PLANE]][0, 0, 1, 1] [1, 1, 4, 4] [1, 1, 1, 1]
// CHECK:               %[[SRC:.*]] = memref.subview %[[X]][%[[N]], %[[C]], 0, 0] [1, 1, 4, 4] [1, 1, 1, 1]
// CHECK:               linalg.copy {{.*}}ins(%[[SRC]] : {{.*}}) outs(%[[IN]] : {{.*}})
// CHECK:               memref.subview %{{.*}}[%[[C]], 0, 0] [1, 3, 3] [1, 1, 1]
// CHECK:               memref.subview %{{.*}}[%[[N]], %[[C]], 0, 0] [1, 1, 4, 4] [1, 1, 1, 1]
// CHECK:               linalg.generic
// PAR-LABEL: func.func @depthwise_padded
// PAR:         scf.forall (%{{.*}}, %{{.*}}) in (2, 4)
// PAR:           memref.alloca() {alignment = 64 : i64} : memref<1x1x6x6xf32>
func.func @depthwise_padded(%x: memref<2x4x4x4xf32>, %f: memref<4x3x3xf32>, %y: memref<2x4x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<2x4x6x6xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<2x4x6x6xf32>)
  %interior = memref.subview %p[0, 0, 1, 1] [2, 4, 4, 4] [1, 1, 1, 1] : memref<2x4x6x6xf32> to memref<2x4x4x4xf32, strided<[144, 36, 6, 1], offset: 7>>
  memref.copy %x, %interior : memref<2x4x4x4xf32> to memref<2x4x4x4xf32, strided<[144, 36, 6, 1], offset: 7>>
  linalg.generic {indexing_maps = [#din, #dw, #dout],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%p, %f : memref<2x4x6x6xf32>, memref<4x3x3xf32>) outs(%y : memref<2x4x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  memref.dealloc %p : memref<2x4x6x6xf32>
  return
}

// The output filled with zeros just before (the importer's accumulator): the first tap adds to the
// fill's constant instead of reading the output, and the fill goes (the output is only written).
// A fill of another buffer, or one the kernel is not the next to touch, stays.
// CHECK-LABEL: func.func @depthwise_filled
// CHECK-SAME:    (%{{.*}}: memref<2x4x5x5xf32>, %{{.*}}: memref<4x2x2xf32>, %[[Y:.*]]: memref<2x4x4x4xf32>, %[[Z:.*]]: memref<2x4x4x4xf32>)
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT:     linalg.fill
// CHECK:         linalg.generic
// CHECK:         ^bb0(%[[X0:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %[[W0:.*]]: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// CHECK:           %[[M0:.*]] = arith.mulf %[[X0]], %[[W0]]
// CHECK:           arith.addf %[[ZERO]], %[[M0]]
// CHECK:         linalg.fill ins(%[[ZERO]] : f32) outs(%[[Z]]
// CHECK:         memref.copy %[[Z]], %[[Y]]
// CHECK:         linalg.generic
// CHECK:         ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %[[O:.*]]: f32):
// CHECK:           arith.addf %[[O]], %{{.*}}
func.func @depthwise_filled(%x: memref<2x4x5x5xf32>, %f: memref<4x2x2xf32>, %y: memref<2x4x4x4xf32>, %z: memref<2x4x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<2x4x4x4xf32>)
  linalg.generic {indexing_maps = [#din, #dw, #dout],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %f : memref<2x4x5x5xf32>, memref<4x2x2xf32>) outs(%y : memref<2x4x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%z : memref<2x4x4x4xf32>)
  memref.copy %z, %y : memref<2x4x4x4xf32> to memref<2x4x4x4xf32>
  linalg.generic {indexing_maps = [#din, #dw, #dout],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %f : memref<2x4x5x5xf32>, memref<4x2x2xf32>) outs(%y : memref<2x4x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  return
}
