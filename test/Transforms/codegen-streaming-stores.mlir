// RUN: vt-opt %s --split-input-file --codegen-streaming-stores | filecheck %s

// A marked loop (a large transposing copy's tiles): its 2-row tile is written row by row, each row
// with a streaming store where its address is a multiple of the row's 64 bytes, else an ordinary
// store. The mark is removed.
// CHECK-LABEL: func.func @marked
// CHECK:         scf.for
// CHECK:           memref.extract_aligned_pointer_as_index %[[OUT:.*]] :
// CHECK:           %[[ROW0:.*]] = vector.extract %[[TILE:.*]][0] : vector<16xf32> from vector<2x16xf32>
// CHECK:           scf.if
// CHECK-NEXT:        vector.store %[[ROW0]], %[[OUT]][%[[I:.*]], %[[J:.*]]] {alignment = 64 : i64, nontemporal = true}
// CHECK:           } else {
// CHECK-NEXT:        vector.store %[[ROW0]], %[[OUT]][%[[I]], %[[J]]] :
// CHECK:           %[[ROW1:.*]] = vector.extract %[[TILE]][1]
// CHECK:           %[[I1:.*]] = arith.addi %[[I]], %{{.*}} : index
// CHECK:           vector.store %[[ROW1]], %[[OUT]][%[[I1]], %[[J]]] {alignment = 64 : i64, nontemporal = true}
// CHECK-NOT:       vector.transfer_write
// CHECK-NOT:     codegen.streaming_stores
func.func @marked(%tile: vector<2x16xf32>, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c64 = arith.constant 64 : index
  scf.for %i = %c0 to %c64 step %c2 {
    vector.transfer_write %tile, %out[%i, %c0] {in_bounds = [true, true]} : vector<2x16xf32>, memref<64x64xf32>
  } {codegen.streaming_stores}
  return
}

// -----

// Left alone: a write outside a marked loop, an out-of-bounds one, a transposing one, and one of a
// row smaller than 16 bytes.
// CHECK-LABEL: func.func @kept
// CHECK-NOT:     nontemporal
// CHECK-COUNT-4: vector.transfer_write
func.func @kept(%v: vector<16xf32>, %small: vector<2xf32>, %t: vector<2x16xf32>, %out: memref<64x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c60 = arith.constant 60 : index
  vector.transfer_write %v, %out[%c0, %c0] {in_bounds = [true]} : vector<16xf32>, memref<64x64xf32>
  scf.for %i = %c0 to %c60 step %c1 {
    vector.transfer_write %v, %out[%i, %c60] {in_bounds = [false]} : vector<16xf32>, memref<64x64xf32>
    vector.transfer_write %t, %out[%c0, %i] {in_bounds = [true, true], permutation_map = affine_map<(d0, d1) -> (d1, d0)>} : vector<2x16xf32>, memref<64x64xf32>
    vector.transfer_write %small, %out[%i, %c0] {in_bounds = [true]} : vector<2xf32>, memref<64x64xf32>
  } {codegen.streaming_stores}
  return
}
