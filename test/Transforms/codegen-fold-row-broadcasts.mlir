// RUN: vt-opt %s --split-input-file --codegen-fold-row-broadcasts --canonicalize | filecheck %s

// A register tile's A column (4 rows) broadcast across 8 lanes as the vectoriser writes it: a
// broadcast along a new leading dimension, then a transpose lowered to a flattened shuffle. Row i
// is a_i in every lane, so it is one broadcast that stretches the column's unit dimension.
// CHECK-LABEL: func.func @column_splat
// CHECK-SAME:    (%[[A:.*]]: vector<4x1xf32>, %[[B:.*]]: vector<4x8xf32>)
// CHECK-NOT:     vector.shuffle
// CHECK:         %[[S:.*]] = vector.broadcast %[[A]] : vector<4x1xf32> to vector<4x8xf32>
// CHECK:         arith.mulf %[[B]], %[[S]]
func.func @column_splat(%a: vector<4x1xf32>, %b: vector<4x8xf32>) -> vector<4x8xf32> {
  %0 = vector.broadcast %a : vector<4x1xf32> to vector<8x4x1xf32>
  %1 = vector.shape_cast %0 : vector<8x4x1xf32> to vector<32xf32>
  %2 = vector.shuffle %1, %1 [0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29, 2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31] : vector<32xf32>, vector<32xf32>
  %3 = vector.shape_cast %2 : vector<32xf32> to vector<4x8xf32>
  %4 = arith.mulf %b, %3 : vector<4x8xf32>
  return %4 : vector<4x8xf32>
}

// -----

// The same through an unlowered vector.transpose, and from a 1-D column (shape-cast to 4x1 first).
// CHECK-LABEL: func.func @transposed_column
// CHECK-SAME:    (%[[A:.*]]: vector<4xf32>)
// CHECK:         %[[C:.*]] = vector.shape_cast %[[A]] : vector<4xf32> to vector<4x1xf32>
// CHECK:         %[[S:.*]] = vector.broadcast %[[C]] : vector<4x1xf32> to vector<4x8xf32>
// CHECK:         return %[[S]]
func.func @transposed_column(%a: vector<4xf32>) -> vector<4x8xf32> {
  %0 = vector.broadcast %a : vector<4xf32> to vector<8x4xf32>
  %1 = vector.transpose %0, [1, 0] : vector<8x4xf32> to vector<4x8xf32>
  return %1 : vector<4x8xf32>
}

// -----

// Not a splat per row, left as they are: a transpose of a 2-D value, a shuffle that takes lanes
// from two vectors, one with a poison lane.
// CHECK-LABEL: func.func @kept
// CHECK:         vector.transpose %{{.*}}, [1, 0] : vector<8x4xf32> to vector<4x8xf32>
// CHECK:         vector.shuffle %{{.*}}, %{{.*}} [4, 5, 6, 7, 0, 1, 2, 3] : vector<4xf32>, vector<4xf32>
// CHECK:         vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, -1]
func.func @kept(%m: vector<8x4xf32>, %a: vector<4xf32>, %b: vector<4xf32>) -> (vector<4x8xf32>, vector<2x4xf32>, vector<2x4xf32>) {
  %0 = vector.transpose %m, [1, 0] : vector<8x4xf32> to vector<4x8xf32>
  %1 = vector.shuffle %b, %a [4, 5, 6, 7, 0, 1, 2, 3] : vector<4xf32>, vector<4xf32>
  %2 = vector.shape_cast %1 : vector<8xf32> to vector<2x4xf32>
  %3 = vector.shuffle %a, %a [0, 1, 2, 3, 4, 5, 6, -1] : vector<4xf32>, vector<4xf32>
  %4 = vector.shape_cast %3 : vector<8xf32> to vector<2x4xf32>
  return %0, %2, %4 : vector<4x8xf32>, vector<2x4xf32>, vector<2x4xf32>
}
