// RUN: vt-opt %s --codegen-keep-strided-transfer-views | filecheck %s
// RUN: vt-opt %s --pass-pipeline='builtin.module(codegen-keep-strided-transfer-views, fold-memref-alias-ops)' | filecheck %s --check-prefix=FOLD

// A transposing read whose vector runs along a stride-2 subview dimension (d0): the subview's
// layout is made explicit, and fold-memref-alias-ops (which would read rows 0, 1, 2 of %x instead
// of 0, 2, 4) leaves it.
// CHECK-LABEL: func.func @strided_vector_dim
// CHECK:         %[[V:.*]] = memref.subview %{{.*}}[0, 0, 0] [3, 5, 3] [2, 1, 1]
// CHECK:         %[[BASE:.*]], %{{.*}}, %{{.*}}:3, %{{.*}}:3 = memref.extract_strided_metadata %[[V]]
// CHECK:         %[[CAST:.*]] = memref.reinterpret_cast %[[BASE]] to offset: [0], sizes: [3, 5, 3], strides: [30, 3, 1]
// CHECK:         vector.transfer_read %[[CAST]]
// FOLD-LABEL: func.func @strided_vector_dim
// FOLD:         memref.reinterpret_cast
// FOLD:         vector.transfer_read %reinterpret_cast
func.func @strided_vector_dim(%x: memref<9x5x3xf32>, %i: index) -> vector<3x3xf32> {
  %c0 = arith.constant 0 : index
  %pad = ub.poison : f32
  %v = memref.subview %x[0, 0, 0] [3, 5, 3] [2, 1, 1] : memref<9x5x3xf32> to memref<3x5x3xf32, strided<[30, 3, 1]>>
  %r = vector.transfer_read %v[%c0, %i, %c0], %pad {in_bounds = [true, true], permutation_map = affine_map<(d0, d1, d2) -> (d2, d0)>} : memref<3x5x3xf32, strided<[30, 3, 1]>>, vector<3x3xf32>
  return %r : vector<3x3xf32>
}

// The stride on a dimension no vector dimension runs along (a row of every other image): left to
// the fold, which scales the index.
// CHECK-LABEL: func.func @strided_outer_dim
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         vector.transfer_read %{{.*}} : memref<3x5x3xf32, strided<[30, 3, 1]>>, vector<3xf32>
func.func @strided_outer_dim(%x: memref<9x5x3xf32>, %i: index) -> vector<3xf32> {
  %c0 = arith.constant 0 : index
  %pad = ub.poison : f32
  %v = memref.subview %x[0, 0, 0] [3, 5, 3] [2, 1, 1] : memref<9x5x3xf32> to memref<3x5x3xf32, strided<[30, 3, 1]>>
  %r = vector.transfer_read %v[%i, %c0, %c0], %pad {in_bounds = [true]} : memref<3x5x3xf32, strided<[30, 3, 1]>>, vector<3xf32>
  return %r : vector<3xf32>
}

// A write along a strided dimension of a rank-reducing subview (the unit dimension dropped): kept too.
// CHECK-LABEL: func.func @strided_write_rank_reducing
// CHECK:         memref.reinterpret_cast
// CHECK:         vector.transfer_write %{{.*}}, %reinterpret_cast
func.func @strided_write_rank_reducing(%x: memref<1x8x4xf32>, %v: vector<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %s = memref.subview %x[0, 0, 0] [1, 4, 4] [1, 2, 1] : memref<1x8x4xf32> to memref<4x4xf32, strided<[8, 1]>>
  vector.transfer_write %v, %s[%c0, %c0] {in_bounds = [true, true]} : vector<4x4xf32>, memref<4x4xf32, strided<[8, 1]>>
  return
}
