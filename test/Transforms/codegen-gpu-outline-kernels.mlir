// RUN: vt-opt %s --codegen-gpu-outline-kernels | filecheck %s

// The GPU-scheduled launches become gpu.modules before the naive mapping makes the other launches;
// each launch_func and outlined gpu.func keeps its launch's kernel id (upstream outlining drops it).
// CHECK-LABEL: func.func @two_kernels
// CHECK:         gpu.launch_func @[[M0:.*]]::@{{.*}} blocks in ({{.*}}) threads in ({{.*}}) args({{.*}}) {codegen.kernel = 3 : i64}
// CHECK:         gpu.launch_func @[[M1:.*]]::@{{.*}} blocks in ({{.*}}) threads in ({{.*}}) args({{.*}}) {codegen.kernel = 5 : i64}
// CHECK:       gpu.module @[[M0]] {
// CHECK:         gpu.func @{{.*}} kernel attributes {codegen.kernel = 3 : i64
// CHECK:           arith.addf
// CHECK:       gpu.module @[[M1]] {
// CHECK:         gpu.func @{{.*}} kernel attributes {codegen.kernel = 5 : i64
func.func @two_kernels(%x: memref<256xf32>, %y: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<()[s0, s1] -> (s0 * 128 + s1)>()[%bx, %tx]
    %v = memref.load %x[%i] : memref<256xf32>
    %d = arith.addf %v, %v : f32
    memref.store %d, %y[%i] : memref<256xf32>
    gpu.terminator
  } {codegen.kernel = 3 : i64}
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c128, %sy = %c1, %sz = %c1) {
    %v = memref.load %y[%tx] : memref<256xf32>
    memref.store %v, %x[%tx] : memref<256xf32>
    gpu.terminator
  } {codegen.kernel = 5 : i64}
  return
}
