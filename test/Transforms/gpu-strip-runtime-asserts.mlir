// RUN: vt-opt %s --gpu-strip-runtime-asserts | filecheck %s

// torch-mlir's batch-norm guard: the assert goes, the computation stays.
// CHECK-LABEL: func.func @batchnorm_guard
// CHECK-NOT:     cf.assert
// CHECK:         scf.parallel
// CHECK:           arith.divf
func.func @batchnorm_guard(%var: memref<4xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %v = memref.load %var[%i] : memref<4xf32>
    %nz = arith.cmpf one, %v, %zero : f32
    cf.assert %nz, "unimplemented: tensor with zero element"
    %r = arith.divf %one, %v : f32
    memref.store %r, %out[%i] : memref<4xf32>
    scf.reduce
  }
  return
}
