// RUN: vt-opt %s --split-input-file --codegen-reciprocal-divisions | filecheck %s

// Softmax's last kernel after the vector schedule: the row's sum broadcast before the loop over the
// row, each vector divided by it. The marked division becomes a multiplication by the reciprocal,
// computed once, right after the broadcast; two divisions by the same sum share it; the mark is gone.
// CHECK-LABEL: func.func @row_sum
// CHECK:         %[[S:.*]] = vector.broadcast
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant dense<1.000000e+00> : vector<16xf32>
// CHECK-NEXT:    %[[R:.*]] = arith.divf %[[ONE]], %[[S]] : vector<16xf32>
// CHECK:         scf.for
// CHECK:           %[[X:.*]] = vector.transfer_read
// CHECK-NEXT:      %[[Q:.*]] = arith.mulf %[[X]], %[[R]] : vector<16xf32>
// CHECK-NEXT:      %[[Q2:.*]] = arith.mulf %[[Q]], %[[R]] : vector<16xf32>
// CHECK-NEXT:      vector.transfer_write %[[Q2]]
// CHECK-NOT:     codegen.reciprocal
func.func @row_sum(%x: memref<4x64xf32>, %sum: memref<4xf32>, %row: index) {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %p = ub.poison : f32
  %s = memref.load %sum[%row] : memref<4xf32>
  %b = vector.broadcast %s : f32 to vector<16xf32>
  scf.for %j = %c0 to %c64 step %c16 {
    %v = vector.transfer_read %x[%row, %j], %p {in_bounds = [true]} : memref<4x64xf32>, vector<16xf32>
    %q = arith.divf %v, %b {codegen.reciprocal} : vector<16xf32>
    %q2 = arith.divf %q, %b {codegen.reciprocal} : vector<16xf32>
    vector.transfer_write %q2, %x[%row, %j] {in_bounds = [true]} : vector<16xf32>, memref<4x64xf32>
  }
  return
}

// -----

// Kept as divisions, marks removed: a divisor computed in the loop (one division per value either
// way); an unmarked division (a kernel under EXACT_SCHEDULES, or another kind's); a constant divisor
// (an average pool's window size: PyTorch divides); a bf16 division (its reciprocal would be rounded
// to bf16); a division in no loop.
// CHECK-LABEL: func.func @kept
// CHECK:         scf.for
// CHECK:           arith.divf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:           arith.divf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:           arith.divf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:           arith.divf %{{.*}}, %{{.*}} : vector<16xbf16>
// CHECK:         arith.divf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK-NOT:     arith.mulf
// CHECK-NOT:     codegen.reciprocal
func.func @kept(%x: memref<64xf32>, %y: memref<64xbf16>, %b: vector<16xf32>, %h: vector<16xbf16>) -> vector<16xf32> {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %p = ub.poison : f32
  %pb = ub.poison : bf16
  %nine = arith.constant 9.0 : f32
  %n = vector.broadcast %nine : f32 to vector<16xf32>
  scf.for %j = %c0 to %c64 step %c16 {
    %v = vector.transfer_read %x[%j], %p {in_bounds = [true]} : memref<64xf32>, vector<16xf32>
    %e = math.exp %v : vector<16xf32>
    %q = arith.divf %v, %e {codegen.reciprocal} : vector<16xf32>
    %u = arith.divf %q, %b : vector<16xf32>
    %a = arith.divf %u, %n {codegen.reciprocal} : vector<16xf32>
    vector.transfer_write %a, %x[%j] {in_bounds = [true]} : vector<16xf32>, memref<64xf32>
    %w = vector.transfer_read %y[%j], %pb {in_bounds = [true]} : memref<64xbf16>, vector<16xbf16>
    %r = arith.divf %w, %h {codegen.reciprocal} : vector<16xbf16>
    vector.transfer_write %r, %y[%j] {in_bounds = [true]} : vector<16xbf16>, memref<64xbf16>
  }
  %o = arith.divf %b, %b {codegen.reciprocal} : vector<16xf32>
  return %o : vector<16xf32>
}
