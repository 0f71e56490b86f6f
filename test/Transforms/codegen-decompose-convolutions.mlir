// RUN: vt-opt %s --codegen-decompose-convolutions | filecheck %s

#in = affine_map<(n, f, h, w, c, kh, kw) -> (n, c, h * 2 + kh, w * 2 + kw)>
#wt = affine_map<(n, f, h, w, c, kh, kw) -> (f, c, kh, kw)>
#out = affine_map<(n, f, h, w, c, kh, kw) -> (n, f, h, w)>

// A 3x3 stride-2 convolution: one loop per filter dimension; inside, per tap, the same product over
// (n, f, h, w, c) reading a strided subview of the input shifted by the tap and the tap's filter slice
// (rank-reduced): a contraction with projected-permutation maps.
// CHECK-DAG:   #[[IN:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2, d3)>
// CHECK-DAG:   #[[W:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4)>
// CHECK-DAG:   #[[OUT:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
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
