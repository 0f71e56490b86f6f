// RUN: vt-opt %s --codegen-fuse-rows | filecheck %s
// RUN: vt-opt %s --codegen-fuse-rows="block-bytes=65536" | filecheck %s --check-prefix=BLOCK

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row3 = affine_map<(d0, d1, d2) -> (d0, d1)>

// An RMSNorm as the kernel level holds it: the row buffer's fill, the sum of squares, the
// normalisation. One loop over the rows (16 KiB per block: one row of 4096 f32), each kernel on the
// row's subviews; the scale (read whole) is no subview; the free moves after the loop.
// CHECK-LABEL: func.func @rmsnorm
// CHECK:         %[[S:.*]] = memref.alloc() {alignment = 64 : i64} : memref<64x1xf32>
// CHECK:         scf.forall (%[[I:.*]]) in (64) {
// CHECK:           %[[SS:.*]] = memref.subview %[[S]][%[[I]], 0] [1, 1] [1, 1]
// CHECK:           linalg.generic {{.*}} outs(%[[SS]] :
// CHECK:           %[[XS:.*]] = memref.subview %arg0[%[[I]], 0] [1, 4096] [1, 1]
// CHECK:           linalg.generic {{.*}} ins(%[[XS]] : {{.*}}) outs(%[[SS]] :
// CHECK:           %[[YS:.*]] = memref.subview %arg2[%[[I]], 0] [1, 4096] [1, 1]
// CHECK:           linalg.generic {{.*}} ins(%[[XS]], %[[SS]], %arg1 : {{.*}}) outs(%[[YS]] :
// CHECK:         } {codegen.row_loop}
// CHECK-NEXT:    memref.dealloc %[[S]]
// CHECK-NEXT:    return
// Four rows of 4096 f32 per block with block-bytes=65536:
// BLOCK-LABEL: func.func @rmsnorm
// BLOCK:         scf.forall (%[[I:.*]]) = (0) to (64) step (4) {
// BLOCK:           memref.subview %arg0[%[[I]], 0] [4, 4096] [1, 1]
func.func @rmsnorm(%x: memref<64x4096xf32>, %w: memref<4096xf32>, %y: memref<64x4096xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %n = arith.constant 4.096000e+03 : f32
  %s = memref.alloc() {alignment = 64 : i64} : memref<64x1xf32>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%s : memref<64x1xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x4096xf32>) outs(%s : memref<64x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    %r = arith.addf %m, %o : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s, %w : memref<64x4096xf32>, memref<64x1xf32>, memref<4096xf32>) outs(%y : memref<64x4096xf32>) {
  ^bb0(%a: f32, %t: f32, %g: f32, %o: f32):
    %v = arith.divf %t, %n : f32
    %q = math.rsqrt %v : f32
    %b = arith.mulf %a, %q : f32
    %r = arith.mulf %b, %g : f32
    linalg.yield %r : f32
  }
  memref.dealloc %s : memref<64x1xf32>
  return
}

// A softmax over the last dimension of a 3-d tensor, the max read through a view with a unit
// dimension, the exponentials written into the output and normalised there in place: the row loops
// are the two outer ones (blocks of 4 rows of 1024 f32 along the inner one), the unit loop of the max is not one.
// A kernel between them that touches none of their buffers runs before the loop.
// CHECK-LABEL: func.func @softmax
// CHECK:         linalg.generic {{.*}} outs(%arg2 : memref<16xf32>)
// CHECK:         scf.forall (%[[I:.*]], %[[J:.*]]) = (0, 0) to (4, 32) step (1, 4) {
// CHECK:           memref.subview %{{.*}}[%[[I]], %[[J]], 0, 0] [1, 4, 1, 1024] [1, 1, 1, 1]
// CHECK-COUNT-5:   linalg.generic
// CHECK:         } {codegen.row_loop}
// CHECK-NEXT:    memref.dealloc
func.func @softmax(%x: memref<4x32x1024xf32>, %y: memref<4x32x1024xf32>, %other: memref<16xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %m = memref.alloc() {alignment = 64 : i64} : memref<4x32x1xf32>
  linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]} outs(%m : memref<4x32x1xf32>) {
  ^bb0(%o: f32):
    linalg.yield %ninf : f32
  }
  %xv = memref.expand_shape %x [[0], [1, 2], [3]] output_shape [4, 32, 1, 1024] : memref<4x32x1024xf32> into memref<4x32x1x1024xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%xv : memref<4x32x1x1024xf32>) outs(%m : memref<4x32x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id3, affine_map<(d0, d1, d2) -> (d0, d1, 0)>, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m : memref<4x32x1024xf32>, memref<4x32x1xf32>) outs(%y : memref<4x32x1024xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %e = math.exp %d : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%other : memref<16xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]} outs(%m : memref<4x32x1xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [#id3, affine_map<(d0, d1, d2) -> (d0, d1, 0)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%y : memref<4x32x1024xf32>) outs(%m : memref<4x32x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id3, affine_map<(d0, d1, d2) -> (d0, d1, 0)>, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%y, %m : memref<4x32x1024xf32>, memref<4x32x1xf32>) outs(%y : memref<4x32x1024xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.divf %a, %b : f32
    linalg.yield %d : f32
  }
  memref.dealloc %m : memref<4x32x1xf32>
  return
}

// Not fused: a kernel that reads the row sums of every row (a column sum of them) stands between the
// reduction and the normalisation; a group too small for a parallel loop (8 rows of 64) fits the caches anyway.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT:     scf.forall
// CHECK:         return
func.func @not_fused(%x: memref<64x4096xf32>, %y: memref<64x4096xf32>, %t: memref<1xf32>,
                     %u: memref<8x64xf32>, %v: memref<8x64xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %s = memref.alloc() {alignment = 64 : i64} : memref<64x1xf32>
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x4096xf32>) outs(%s : memref<64x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0, 0)>, affine_map<(d0) -> (0)>], iterator_types = ["reduction"]}
      ins(%s : memref<64x1xf32>) outs(%t : memref<1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<64x4096xf32>, memref<64x1xf32>) outs(%y : memref<64x4096xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.divf %a, %b : f32
    linalg.yield %d : f32
  }
  memref.dealloc %s : memref<64x1xf32>
  %s2 = memref.alloc() {alignment = 64 : i64} : memref<8x1xf32>
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%u : memref<8x64xf32>) outs(%s2 : memref<8x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%u, %s2 : memref<8x64xf32>, memref<8x1xf32>) outs(%v : memref<8x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.divf %a, %b : f32
    linalg.yield %d : f32
  }
  memref.dealloc %s2 : memref<8x1xf32>
  return
}
