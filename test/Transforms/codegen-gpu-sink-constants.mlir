// RUN: vt-opt %s --codegen-gpu-sink-constants | filecheck %s

// Constants used in a GPU-scheduled launch (codegen.kernel) are cloned into its body, so outlining
// makes no parameter of them (a vector constant or a poison value cannot be passed); the naive
// mapping's launch keeps reading its constant from the host side.
// CHECK-LABEL: func.func @scheduled_and_naive
// CHECK:         %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:         gpu.launch
// CHECK-DAG:       %[[PAD:.*]] = ub.poison : f32
// CHECK-DAG:       %[[ONES:.*]] = arith.constant dense<1.000000e+00> : vector<4xf32>
// CHECK:           vector.transfer_read %{{.*}}, %[[PAD]]
// CHECK:           arith.addf %{{.*}}, %[[ONES]] : vector<4xf32>
// CHECK:         } {codegen.kernel = 0 : i64}
// CHECK:         gpu.launch
// CHECK-NOT:       arith.constant
// CHECK:           arith.mulf %{{.*}}, %[[TWO]] : f32
func.func @scheduled_and_naive(%x: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %ones = arith.constant dense<1.000000e+00> : vector<4xf32>
  %pad = ub.poison : f32
  %two = arith.constant 2.000000e+00 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<()[s0] -> (s0 * 4)>()[%tx]
    %v = vector.transfer_read %x[%i], %pad {in_bounds = [true]} : memref<256xf32>, vector<4xf32>
    %s = arith.addf %v, %ones : vector<4xf32>
    vector.transfer_write %s, %x[%i] {in_bounds = [true]} : vector<4xf32>, memref<256xf32>
    gpu.terminator
  } {codegen.kernel = 0 : i64}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %v = memref.load %x[%tx] : memref<256xf32>
    %d = arith.mulf %v, %two : f32
    memref.store %d, %x[%tx] : memref<256xf32>
    gpu.terminator
  }
  return
}
