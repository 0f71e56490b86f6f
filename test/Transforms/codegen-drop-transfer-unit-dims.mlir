// RUN: vt-opt %s --split-input-file --codegen-drop-transfer-unit-dims | filecheck %s

// A 1x1 convolution over one pixel: its register tile's accumulator read through (d0, d1) and written
// back with unit dimensions, on an N x F x 1 x 1 buffer. Both go through an N x F view, as minor
// identities; the write's shape cast goes with it.
// CHECK-LABEL: func.func @accumulator
// CHECK:         %[[V:.*]] = memref.subview %arg0[0, 0, 0, 0] [8, 64, 1, 1] [1, 1, 1, 1] : memref<8x64x1x1xf32> to memref<8x64xf32, strided<[64, 1]>>
// CHECK:         %[[R:.*]] = vector.transfer_read %[[V]][%c0, %arg1], %{{.*}} {in_bounds = [true, true]} : memref<8x64xf32, strided<[64, 1]>>, vector<8x32xf32>
// CHECK:         %[[S:.*]] = arith.addf %[[R]], %[[R]]
// CHECK-NOT:     vector.shape_cast
// CHECK:         %[[W:.*]] = memref.subview %arg0[0, 0, 0, 0] [8, 64, 1, 1] [1, 1, 1, 1] : memref<8x64x1x1xf32> to memref<8x64xf32, strided<[64, 1]>>
// CHECK:         vector.transfer_write %[[S]], %[[W]][%c0, %arg1] {in_bounds = [true, true]} : vector<8x32xf32>, memref<8x64xf32, strided<[64, 1]>>
func.func @accumulator(%c: memref<8x64x1x1xf32>, %j: index) {
  %c0 = arith.constant 0 : index
  %f0 = arith.constant 0.0 : f32
  %acc = vector.transfer_read %c[%c0, %j, %c0, %c0], %f0 {in_bounds = [true, true], permutation_map = affine_map<(d0, d1, d2, d3) -> (d0, d1)>} : memref<8x64x1x1xf32>, vector<8x32xf32>
  %s = arith.addf %acc, %acc : vector<8x32xf32>
  %s4 = vector.shape_cast %s : vector<8x32xf32> to vector<8x32x1x1xf32>
  vector.transfer_write %s4, %c[%c0, %j, %c0, %c0] {in_bounds = [true, true, true, true]} : vector<8x32x1x1xf32>, memref<8x64x1x1xf32>
  return
}

// -----

// Packing a row of A from an N x C x 1 x 1 buffer with an offset (a view of a concat buffer), and the
// broadcast read of a column: both through an N x C view; the column's shape cast reads the reduced
// vector directly.
// CHECK-LABEL: func.func @rows_and_columns
// CHECK:         %[[V:.*]] = memref.subview %arg0[0, 0, 0, 0] [8, 752, 1, 1] [1, 1, 1, 1] : memref<8x752x1x1xf32, strided<[832, 1, 1, 1], offset: ?>> to memref<8x752xf32, strided<[832, 1], offset: ?>>
// CHECK:         %[[ROW:.*]] = vector.transfer_read %[[V]][%arg1, %arg2], %{{.*}} {in_bounds = [true]} : memref<8x752xf32, strided<[832, 1], offset: ?>>, vector<256xf32>
// CHECK:         %[[U:.*]] = memref.subview %arg0
// CHECK:         %[[COL:.*]] = vector.transfer_read %[[U]][%c0, %arg2], %{{.*}} {in_bounds = [true, true], permutation_map = #{{.*}}} : memref<8x752xf32, strided<[832, 1], offset: ?>>, vector<8x32xf32>
// CHECK-NOT:     vector.shape_cast
// CHECK:         return %[[ROW]], %[[COL]]
func.func @rows_and_columns(%a: memref<8x752x1x1xf32, strided<[832, 1, 1, 1], offset: ?>>, %i: index, %k: index) -> (vector<256xf32>, vector<8x32xf32>) {
  %c0 = arith.constant 0 : index
  %f0 = arith.constant 0.0 : f32
  %row = vector.transfer_read %a[%i, %k, %c0, %c0], %f0 {in_bounds = [true], permutation_map = affine_map<(d0, d1, d2, d3) -> (d1)>} : memref<8x752x1x1xf32, strided<[832, 1, 1, 1], offset: ?>>, vector<256xf32>
  %col = vector.transfer_read %a[%c0, %k, %c0, %c0], %f0 {in_bounds = [true, true, true], permutation_map = affine_map<(d0, d1, d2, d3) -> (d0, 0, d3)>} : memref<8x752x1x1xf32, strided<[832, 1, 1, 1], offset: ?>>, vector<8x32x1xf32>
  %col2 = vector.shape_cast %col : vector<8x32x1xf32> to vector<8x32xf32>
  return %row, %col2 : vector<256xf32>, vector<8x32xf32>
}

// -----

// Left as they are: a unit dimension read at an index that is not a constant 0, and a transfer that
// is a minor identity already (the unit dimension is outermost and the vector has none).
// CHECK-LABEL: func.func @unchanged
// CHECK-NOT:     memref.subview
// CHECK:         return
func.func @unchanged(%a: memref<4x1xf32>, %b: memref<1x4x8xf32>, %i: index) -> (vector<4xf32>, vector<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %f0 = arith.constant 0.0 : f32
  %x = vector.transfer_read %a[%c0, %i], %f0 {permutation_map = affine_map<(d0, d1) -> (d0)>} : memref<4x1xf32>, vector<4xf32>
  %y = vector.transfer_read %b[%c0, %c0, %c0], %f0 {in_bounds = [true, true]} : memref<1x4x8xf32>, vector<4x8xf32>
  return %x, %y : vector<4xf32>, vector<4x8xf32>
}

// -----

// One element along a unit dimension (an NCHW kernel's last, 1-wide loop): a 0-d transfer would be
// left, which has no LLVM lowering; it stays as it is.
// CHECK-LABEL: func.func @one_element
// CHECK-NOT:     memref.subview
// CHECK:         vector.transfer_read %arg0[%c0, %arg1, %c0, %c0]
func.func @one_element(%a: memref<1x512x1x1xf32>, %c: index) -> vector<1xf32> {
  %c0 = arith.constant 0 : index
  %f0 = arith.constant 0.0 : f32
  %x = vector.transfer_read %a[%c0, %c, %c0, %c0], %f0 {in_bounds = [true]} : memref<1x512x1x1xf32>, vector<1xf32>
  return %x : vector<1xf32>
}
