// RUN: vt-opt %s --codegen-transpose-b-operands | filecheck %s

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#bt = affine_map<(d0, d1, d2) -> (d1, d2)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#qa = affine_map<(b, m, n, k) -> (b, m, k)>
#kt = affine_map<(b, m, n, k) -> (b, n, k)>
#qc = affine_map<(b, m, n, k) -> (b, m, n)>
#bn = affine_map<(d0, d1, d2) -> (d2, d1)>

// A Linear's constant weight W[n, k] becomes a new constant global W^T[k, n], read with the map
// (k, n); the original, read by nothing else, goes.
// CHECK-NOT:   memref.global "private" constant @w :
// CHECK:       memref.global "private" constant @w_transposed : memref<4x2xf32> = dense_resource<w_transposed> {alignment = 64 : i64}
// CHECK-NOT:   memref.global "private" constant @w :
// CHECK-LABEL: func.func @linear
// CHECK:         %[[WT:.*]] = memref.get_global @w_transposed : memref<4x2xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %[[WT]] : memref<3x4xf32>, memref<4x2xf32>)
memref.global "private" constant @w : memref<2x4xf32> = dense<[[1.0, 2.0, 0.0, 2.0], [3.0, 4.0, 0.0, 5.0]]>
func.func @linear(%x: memref<3x4xf32>, %y: memref<3x2xf32>) {
  %w = memref.get_global @w : memref<2x4xf32>
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<3x4xf32>, memref<2x4xf32>) outs(%y : memref<3x2xf32>) {
  ^bb0(%in: f32, %wt: f32, %out: f32):
    %m = arith.mulf %in, %wt : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  }
  return
}

// Attention's K in Q @ K^T is no constant: a copy kernel writes K^T before the product, which reads
// it as (b, k, n); the buffer is freed after it.
// CHECK-LABEL: func.func @q_kt
// CHECK:         %[[T:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x8x5xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}} : memref<2x5x8xf32>) outs(%[[T]] : memref<2x8x5xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %[[T]] : memref<2x3x8xf32>, memref<2x8x5xf32>) outs(%{{.*}} : memref<2x3x5xf32>)
// CHECK:         memref.dealloc %[[T]]
func.func @q_kt(%q: memref<2x3x8xf32>, %k: memref<2x5x8xf32>, %s: memref<2x3x5xf32>) {
  linalg.generic {indexing_maps = [#qa, #kt, #qc], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x3x8xf32>, memref<2x5x8xf32>) outs(%s : memref<2x3x5xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    %t = arith.addf %out, %m : f32
    linalg.yield %t : f32
  }
  return
}

// B already has n innermost: nothing to do.
// CHECK-LABEL: func.func @matmul
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic
// CHECK-NOT:     linalg.generic
func.func @matmul(%x: memref<3x4xf32>, %w: memref<4x2xf32>, %y: memref<3x2xf32>) {
  linalg.generic {indexing_maps = [#a, #bn, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<3x4xf32>, memref<4x2xf32>) outs(%y : memref<3x2xf32>) {
  ^bb0(%in: f32, %wt: f32, %out: f32):
    %m = arith.mulf %in, %wt : f32
    %s = arith.addf %out, %m : f32
    linalg.yield %s : f32
  }
  return
}
