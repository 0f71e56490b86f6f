// RUN: vt-opt %s --split-input-file --codegen-hoist-accumulators | filecheck %s

// A register tile's accumulator in a buffer that is sliced after the loop (upstream hoisting refuses
// any buffer with a view user): it becomes a loop-carried vector, read before the loop and written
// after it. A and B are read from other buffers (an argument and a stack panel, through views).
// CHECK-LABEL: func.func @sliced_output
// CHECK:         %[[C:.*]] = memref.alloc()
// CHECK:         %[[INIT:.*]] = vector.transfer_read %[[C]][%c0, %c0]
// CHECK:         %[[SUM:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (vector<4x8xf32>)
// CHECK-NOT:       %[[C]]
// CHECK:           arith.addf %[[ACC]]
// CHECK:           scf.yield
// CHECK:         vector.transfer_write %[[SUM]], %[[C]][%c0, %c0]
// CHECK:         memref.subview %[[C]]
func.func @sliced_output(%a: memref<4x16xf32>, %out: memref<4x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %f0 = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<4x8xf32>
  %panel = memref.alloca() : memref<512xi8>
  %b = memref.view %panel[%c0][] : memref<512xi8> to memref<16x8xf32>
  scf.for %k = %c0 to %c16 step %c1 {
    %acol = memref.subview %a[0, %k] [4, 1] [1, 1] : memref<4x16xf32> to memref<4x1xf32, strided<[16, 1], offset: ?>>
    %av = vector.transfer_read %acol[%c0, %c0], %f0 {in_bounds = [true, true]} : memref<4x1xf32, strided<[16, 1], offset: ?>>, vector<4x1xf32>
    %bv = vector.transfer_read %b[%k, %c0], %f0 {in_bounds = [true]} : memref<16x8xf32>, vector<8xf32>
    %acc = vector.transfer_read %c[%c0, %c0], %f0 {in_bounds = [true, true]} : memref<4x8xf32>, vector<4x8xf32>
    %ab = vector.broadcast %av : vector<4x1xf32> to vector<4x1xf32>
    %as = vector.shape_cast %ab : vector<4x1xf32> to vector<4xf32>
    %bb = vector.broadcast %bv : vector<8xf32> to vector<4x8xf32>
    %at = vector.broadcast %as : vector<4xf32> to vector<8x4xf32>
    %att = vector.transpose %at, [1, 0] : vector<8x4xf32> to vector<4x8xf32>
    %p = arith.mulf %att, %bb : vector<4x8xf32>
    %s = arith.addf %acc, %p : vector<4x8xf32>
    vector.transfer_write %s, %c[%c0, %c0] {in_bounds = [true, true]} : vector<4x8xf32>, memref<4x8xf32>
  }
  %half = memref.subview %c[0, 0] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  memref.copy %half, %out : memref<4x4xf32, strided<[8, 1]>> to memref<4x4xf32>
  memref.dealloc %c : memref<4x8xf32>
  return
}

// -----

// The loop also reads the accumulator's buffer through a view: the pair stays in the loop.
// CHECK-LABEL: func.func @read_through_view
// CHECK:         scf.for
// CHECK-NOT:       iter_args
// CHECK:           vector.transfer_read %{{.*}}[%c0, %c0]
// CHECK:           vector.transfer_write
func.func @read_through_view(%c: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f0 = arith.constant 0.0 : f32
  scf.for %k = %c0 to %c4 step %c1 {
    %row = memref.subview %c[%k, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %r = vector.transfer_read %row[%c0], %f0 {in_bounds = [true]} : memref<8xf32, strided<[1], offset: ?>>, vector<8xf32>
    %acc = vector.transfer_read %c[%c0, %c0], %f0 {in_bounds = [true]} : memref<4x8xf32>, vector<8xf32>
    %s = arith.addf %acc, %r : vector<8xf32>
    vector.transfer_write %s, %c[%c0, %c0] {in_bounds = [true]} : vector<8xf32>, memref<4x8xf32>
  }
  return
}

// -----

// Two reads of the same global (distinct SSA values, one storage) and a write to it: not hoisted.
// An out-of-bounds pair (its padding lanes would be carried as computed values) and a loop with a
// call are not hoisted either.
memref.global "private" @g : memref<8xf32> = dense<1.0>
func.func private @mark()
// CHECK-LABEL: func.func @not_hoisted
// CHECK-NOT:     iter_args
// CHECK:         return
func.func @not_hoisted(%x: memref<8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f0 = arith.constant 0.0 : f32
  %g1 = memref.get_global @g : memref<8xf32>
  %g2 = memref.get_global @g : memref<8xf32>
  scf.for %k = %c0 to %c4 step %c1 {
    %r = vector.transfer_read %g2[%c0], %f0 {in_bounds = [true]} : memref<8xf32>, vector<8xf32>
    %acc = vector.transfer_read %g1[%c0], %f0 {in_bounds = [true]} : memref<8xf32>, vector<8xf32>
    %s = arith.addf %acc, %r : vector<8xf32>
    vector.transfer_write %s, %g1[%c0] {in_bounds = [true]} : vector<8xf32>, memref<8xf32>
  }
  scf.for %k = %c0 to %c4 step %c1 {
    %acc = vector.transfer_read %x[%n], %f0 : memref<8xf32>, vector<8xf32>
    %s = arith.addf %acc, %acc : vector<8xf32>
    vector.transfer_write %s, %x[%n] : vector<8xf32>, memref<8xf32>
  }
  scf.for %k = %c0 to %c4 step %c1 {
    %acc = vector.transfer_read %x[%c0], %f0 {in_bounds = [true]} : memref<8xf32>, vector<8xf32>
    func.call @mark() : () -> ()
    %s = arith.addf %acc, %acc : vector<8xf32>
    vector.transfer_write %s, %x[%c0] {in_bounds = [true]} : vector<8xf32>, memref<8xf32>
  }
  return
}

// -----

// Accumulating into an argument while reading another argument and a global: hoisted (distinct
// arguments are distinct buffers: results are fresh buffers, inputs are written only when donated).
memref.global "private" constant @w : memref<8xf32> = dense<2.0>
// CHECK-LABEL: func.func @arguments
// CHECK:         scf.for {{.*}} iter_args
// CHECK:         vector.transfer_write
// CHECK-NEXT:    return
func.func @arguments(%x: memref<4x8xf32>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f0 = arith.constant 0.0 : f32
  %w = memref.get_global @w : memref<8xf32>
  scf.for %k = %c0 to %c4 step %c1 {
    %r = vector.transfer_read %x[%k, %c0], %f0 {in_bounds = [true]} : memref<4x8xf32>, vector<8xf32>
    %v = vector.transfer_read %w[%c0], %f0 {in_bounds = [true]} : memref<8xf32>, vector<8xf32>
    %acc = vector.transfer_read %y[%c0], %f0 {in_bounds = [true]} : memref<8xf32>, vector<8xf32>
    %p = arith.mulf %r, %v : vector<8xf32>
    %s = arith.addf %acc, %p : vector<8xf32>
    vector.transfer_write %s, %y[%c0] {in_bounds = [true]} : vector<8xf32>, memref<8xf32>
  }
  return
}

// -----

// A 1x1 convolution's output (N x F x 1 x 1, sliced after the loop): canonicalisation reads the
// register tile as vector<8x32> through (d0, d1) and writes it back with its unit dimensions added
// by a shape_cast. The same 8x32 elements in the same order: carried in registers, the shape_cast
// moved after the loop to the write.
// CHECK-DAG:   #[[NF:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
// CHECK-LABEL: func.func @unit_dims_cast
// CHECK:         %[[C:.*]] = memref.alloc()
// CHECK:         %[[INIT:.*]] = vector.transfer_read %[[C]][%c0, %c0, %c0, %c0], {{.*}}permutation_map = #[[NF]]
// CHECK:         %[[SUM:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (vector<8x32xf32>)
// CHECK-NOT:       %[[C]]
// CHECK:           %[[NEW:.*]] = arith.addf %[[ACC]]
// CHECK:           scf.yield %[[NEW]]
// CHECK:         %[[CAST:.*]] = vector.shape_cast %[[SUM]] : vector<8x32xf32> to vector<8x32x1x1xf32>
// CHECK:         vector.transfer_write %[[CAST]], %[[C]][%c0, %c0, %c0, %c0]
func.func @unit_dims_cast(%a: memref<8x144x1x1xf32>, %b: memref<144x32xf32>, %out: memref<8x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c144 = arith.constant 144 : index
  %f0 = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x32x1x1xf32>
  scf.for %k = %c0 to %c144 step %c1 {
    %av = vector.transfer_read %a[%c0, %k, %c0, %c0], %f0 {in_bounds = [true, true, true], permutation_map = affine_map<(d0, d1, d2, d3) -> (d0, 0, d3)>} : memref<8x144x1x1xf32>, vector<8x32x1xf32>
    %bv = vector.transfer_read %b[%k, %c0], %f0 {in_bounds = [true]} : memref<144x32xf32>, vector<32xf32>
    %acc = vector.transfer_read %c[%c0, %c0, %c0, %c0], %f0 {in_bounds = [true, true], permutation_map = affine_map<(d0, d1, d2, d3) -> (d0, d1)>} : memref<8x32x1x1xf32>, vector<8x32xf32>
    %as = vector.shape_cast %av : vector<8x32x1xf32> to vector<8x32xf32>
    %bb = vector.broadcast %bv : vector<32xf32> to vector<8x32xf32>
    %p = arith.mulf %as, %bb : vector<8x32xf32>
    %s = arith.addf %acc, %p : vector<8x32xf32>
    %s4 = vector.shape_cast %s : vector<8x32xf32> to vector<8x32x1x1xf32>
    vector.transfer_write %s4, %c[%c0, %c0, %c0, %c0] {in_bounds = [true, true, true, true]} : vector<8x32x1x1xf32>, memref<8x32x1x1xf32>
  }
  %flat = memref.collapse_shape %c [[0], [1, 2, 3]] : memref<8x32x1x1xf32> into memref<8x32xf32>
  memref.copy %flat, %out : memref<8x32xf32> to memref<8x32xf32>
  memref.dealloc %c : memref<8x32x1x1xf32>
  return
}

// -----

// The write's shape_cast puts the read's elements elsewhere (8x32 written as 32x8 along other
// buffer dimensions): not the same transfer, not hoisted.
// CHECK-LABEL: func.func @other_elements_cast
// CHECK-NOT:     iter_args
// CHECK:         return
func.func @other_elements_cast(%b: memref<32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %f0 = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<32x32x1x1xf32>
  scf.for %k = %c0 to %c4 step %c1 {
    %bv = vector.transfer_read %b[%c0], %f0 {in_bounds = [true]} : memref<32xf32>, vector<32xf32>
    %acc = vector.transfer_read %c[%c0, %c0, %c0, %c0], %f0 {in_bounds = [true, true], permutation_map = affine_map<(d0, d1, d2, d3) -> (d0, d1)>} : memref<32x32x1x1xf32>, vector<8x32xf32>
    %bb = vector.broadcast %bv : vector<32xf32> to vector<8x32xf32>
    %s = arith.addf %acc, %bb : vector<8x32xf32>
    %s4 = vector.shape_cast %s : vector<8x32xf32> to vector<32x8x1x1xf32>
    vector.transfer_write %s4, %c[%c0, %c0, %c0, %c0] {in_bounds = [true, true, true, true]} : vector<32x8x1x1xf32>, memref<32x32x1x1xf32>
  }
  memref.dealloc %c : memref<32x32x1x1xf32>
  return
}
