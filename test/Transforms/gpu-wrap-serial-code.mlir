// RUN: vt-opt %s --gpu-wrap-serial-code | filecheck %s

// A full reduction has no parallel dimension: its loop is wrapped in a one-iteration scf.parallel so
// it becomes a (one-thread) kernel; loops that are already parallel and host ops stay as they are.
// CHECK-LABEL: func.func @full_reduction
// CHECK:         memref.alloc
// CHECK:         scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// CHECK:           scf.parallel
// CHECK:           scf.reduce
// CHECK:         }
// CHECK:         scf.parallel (%{{.*}}) = (%[[C0:.*]]) to (%[[C1:.*]]) step (%[[C1]]) {
// CHECK-NEXT:      scf.for
// CHECK:             memref.load
// CHECK:             arith.addf
// CHECK:           scf.reduce
// CHECK:         return
func.func @full_reduction(%x: memref<8x8xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %tmp = memref.alloc() : memref<8x8xf32>
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
      %v = memref.load %x[%i, %j] : memref<8x8xf32>
      %d = arith.addf %v, %v : f32
      memref.store %d, %tmp[%i, %j] : memref<8x8xf32>
      scf.reduce
    }
    scf.reduce
  }
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %v = memref.load %tmp[%i, %j] : memref<8x8xf32>
      %acc = memref.load %out[] : memref<f32>
      %s = arith.addf %acc, %v : f32
      memref.store %s, %out[] : memref<f32>
    }
  }
  memref.dealloc %tmp : memref<8x8xf32>
  return
}
