// RUN: vt-opt %s --codegen-gpu-drop-unit-dims | filecheck %s

// A batch matmul's block tile: the unit batch loop leaves the maps and iterator types, the
// operands become rank-reducing views of the dynamic-offset tiles (strides and offset kept).
// CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// (the delinearisation maps of @four_block_dims, at the end)
// CHECK-DAG: #[[HI:.*]] = affine_map<(d0) -> ((d0 floordiv 4) mod 2)>
// CHECK-DAG: #[[LO:.*]] = affine_map<(d0) -> (d0 mod 4)>
// CHECK-LABEL: func.func @batch_tile
// CHECK:         %[[VA:.*]] = memref.subview %arg0[0, 0, 0] [1, 16, 32] [1, 1, 1] : memref<1x16x32xf16, strided<[2048, 32, 1], offset: ?>> to memref<16x32xf16, strided<[32, 1], offset: ?>>
// CHECK:         %[[VB:.*]] = memref.subview %arg1[0, 0, 0] [1, 32, 16] [1, 1, 1] : memref<1x32x16xf16, strided<[1536, 48, 1], offset: ?>> to memref<32x16xf16, strided<[48, 1], offset: ?>>
// CHECK:         %[[VC:.*]] = memref.subview %arg2[0, 0, 0] [1, 16, 16] [1, 1, 1] : memref<1x16x16xf32, strided<[3072, 48, 1], offset: ?>> to memref<16x16xf32, strided<[48, 1], offset: ?>>
// CHECK:         linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[C]]], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK-SAME:      ins(%[[VA]], %[[VB]] : {{.*}}) outs(%[[VC]] : {{.*}}) attrs = {codegen.kernel = 1 : i64}
// CHECK:           arith.mulf
func.func @batch_tile(%a: memref<1x16x32xf16, strided<[2048, 32, 1], offset: ?>>, %b: memref<1x32x16xf16, strided<[1536, 48, 1], offset: ?>>,
                      %c: memref<1x16x16xf32, strided<[3072, 48, 1], offset: ?>>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>,
                                   affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<1x16x32xf16, strided<[2048, 32, 1], offset: ?>>, memref<1x32x16xf16, strided<[1536, 48, 1], offset: ?>>)
      outs(%c : memref<1x16x16xf32, strided<[3072, 48, 1], offset: ?>>) attrs = {codegen.kernel = 1 : i64, codegen.drop_unit_dims = 1 : i64} {
  ^bb0(%in: f16, %in_0: f16, %out: f32):
    %0 = arith.extf %in : f16 to f32
    %1 = arith.extf %in_0 : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %out, %2 : f32
    linalg.yield %3 : f32
  }
  return
}

// Ops without the annotation are left alone.
// CHECK-LABEL: func.func @not_annotated
// CHECK-NOT:     memref.subview
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
func.func @not_annotated(%a: memref<1x8xf32>, %c: memref<1x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<1x8xf32>) outs(%c : memref<1x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

// A block forall of four dimensions (two batch tiles of 1 next to the m and n tiles: more than the
// grid's three): the two batch dimensions become one over their 2 x 4 product, delinearised at the
// top of the body; the mapping keeps the inner three entries, the attributes stay.
// CHECK-LABEL: func.func @four_block_dims
// CHECK:         scf.forall (%[[L:.*]], %[[M:.*]], %[[N:.*]]) = (0, 0, 0) to (8, 128, 128) step (1, 64, 32)
// CHECK-NEXT:      %[[I:.*]] = affine.apply #[[HI]](%[[L]])
// CHECK-NEXT:      %[[J:.*]] = affine.apply #[[LO]](%[[L]])
// CHECK-NEXT:      memref.subview %arg0[%[[I]], %[[J]], %[[M]], 0]
// CHECK:           memref.load {{.*}}%[[N]]]
// CHECK:         } {codegen.kernel = 3 : i64, mapping = [#gpu.block<linear_dim_2>, #gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
func.func @four_block_dims(%a: memref<2x4x128x32xf16>) {
  scf.forall (%i, %j, %m, %n) = (0, 0, 0, 0) to (2, 4, 128, 128) step (1, 1, 64, 32) {
    %v = memref.subview %a[%i, %j, %m, 0] [1, 1, 64, 32] [1, 1, 1, 1] : memref<2x4x128x32xf16> to memref<1x1x64x32xf16, strided<[16384, 4096, 32, 1], offset: ?>>
    %c0 = arith.constant 0 : index
    %x = memref.load %v[%c0, %c0, %c0, %n] : memref<1x1x64x32xf16, strided<[16384, 4096, 32, 1], offset: ?>>
    memref.store %x, %v[%c0, %c0, %c0, %c0] : memref<1x1x64x32xf16, strided<[16384, 4096, 32, 1], offset: ?>>
  } {codegen.kernel = 3 : i64, mapping = [#gpu.block<linear_dim_3>, #gpu.block<linear_dim_2>, #gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
  return
}
