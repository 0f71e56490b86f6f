// RUN: vt-opt %s --codegen-gpu-sync-epilogues | filecheck %s

// The accumulator's stores after the k loop (hoisted there after the threads were mapped) and the
// fused epilogue's loads of the same buffer get a barrier between them; a read of a buffer nobody
// wrote since the last barrier (the bias, the accumulators' loads after the fill's barrier) does not.
// CHECK-LABEL: func.func @epilogue_after_accumulators
// CHECK:         gpu.launch
// CHECK:           vector.transfer_write %{{.*}}, %[[C:.*]][%{{.*}}] {{.*}} : vector<4xf32>, memref<256xf32>
// CHECK-NEXT:      gpu.barrier
// CHECK-NOT:       gpu.barrier
// CHECK:           vector.transfer_read %[[C]]
// CHECK:           vector.transfer_read %{{.*}} : memref<256xf16>, vector<4xf16>
// CHECK-NOT:       gpu.barrier
// CHECK:           vector.transfer_write {{.*}} : vector<4xf16>, memref<256xf16>
// CHECK:         } {codegen.epilogue = 2 : i64, codegen.kernel = 1 : i64}
func.func @epilogue_after_accumulators(%c: memref<256xf32>, %bias: memref<256xf16>, %out: memref<256xf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c64 = arith.constant 64 : index
  %zero = arith.constant dense<0.000000e+00> : vector<4xf32>
  %pad = ub.poison : f32
  %pad16 = ub.poison : f16
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<()[s0] -> (s0 * 4)>()[%tx]
    %j = affine.apply affine_map<()[s0] -> ((s0 * 4 + 128) mod 256)>()[%tx]
    vector.transfer_write %zero, %c[%i] {in_bounds = [true]} : vector<4xf32>, memref<256xf32>
    gpu.barrier
    %init = vector.transfer_read %c[%j], %pad {in_bounds = [true]} : memref<256xf32>, vector<4xf32>
    %acc = scf.for %k = %c0 to %c4 step %c1 iter_args(%a = %init) -> (vector<4xf32>) {
      %s = arith.addf %a, %a : vector<4xf32>
      gpu.barrier
      scf.yield %s : vector<4xf32>
    }
    vector.transfer_write %acc, %c[%j] {in_bounds = [true]} : vector<4xf32>, memref<256xf32>
    %v = vector.transfer_read %c[%i], %pad {in_bounds = [true]} : memref<256xf32>, vector<4xf32>
    %b = vector.transfer_read %bias[%i], %pad16 {in_bounds = [true]} : memref<256xf16>, vector<4xf16>
    %bf = arith.extf %b : vector<4xf16> to vector<4xf32>
    %sum = arith.addf %v, %bf : vector<4xf32>
    %h = arith.truncf %sum : vector<4xf32> to vector<4xf16>
    vector.transfer_write %h, %out[%i] {in_bounds = [true]} : vector<4xf16>, memref<256xf16>
    gpu.terminator
  } {codegen.epilogue = 2 : i64, codegen.kernel = 1 : i64}
  return
}

// A launch without a fused epilogue is left alone.
// CHECK-LABEL: func.func @no_epilogue
// CHECK-NOT:     gpu.barrier
func.func @no_epilogue(%c: memref<256xf32>) {
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %pad = ub.poison : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
    %i = affine.apply affine_map<()[s0] -> (s0 * 4)>()[%tx]
    %v = vector.transfer_read %c[%i], %pad {in_bounds = [true]} : memref<256xf32>, vector<4xf32>
    %s = arith.addf %v, %v : vector<4xf32>
    vector.transfer_write %s, %c[%i] {in_bounds = [true]} : vector<4xf32>, memref<256xf32>
    %w = vector.transfer_read %c[%i], %pad {in_bounds = [true]} : memref<256xf32>, vector<4xf32>
    vector.transfer_write %w, %c[%i] {in_bounds = [true]} : vector<4xf32>, memref<256xf32>
    gpu.terminator
  } {codegen.kernel = 0 : i64}
  return
}
