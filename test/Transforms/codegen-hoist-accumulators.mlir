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
