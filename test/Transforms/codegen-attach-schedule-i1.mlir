// RUN: vt-opt %s --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256})' | filecheck %s
// RUN: vt-opt %s --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256}, transform-interpreter, codegen-erase-schedule, func.func(convert-linalg-to-loops))' | filecheck %s --check-prefix=APPLIED
// RUN: vt-opt %s --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256}, transform-interpreter, codegen-erase-schedule, func.func(convert-linalg-to-loops), convert-vector-to-scf{full-unroll=true}, expand-strided-metadata, lower-affine, finalize-memref-to-llvm, convert-scf-to-cf, convert-vector-to-llvm, convert-to-llvm, reconcile-unrealized-casts)' | filecheck %s --check-prefix=LLVM

// Buffers of i1 (torch's bool tensors: a byte per element) are never read or written as vectors of
// several i1: LLVM lays such a vector out bit-packed, so a `vector<8xi1>` store wrote 8 flags into one
// byte and left 7 bytes uninitialised for the scalar code (or torch) reading them. A kernel that
// would (a comparison writing a mask, a select reading one along the vectors) keeps its loops; one
// that reads its mask once per row and broadcasts it, or writes one flag per row, is scheduled.

#id = affine_map<(d0, d1) -> (d0, d1)>
#rowmask = affine_map<(d0, d1) -> (d0, 0)>

// CHECK-LABEL: func.func @masks
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : memref<8x64xi1>) attrs = {codegen.kernel = 0 : i64} {
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : memref<8x64xf32>) attrs = {codegen.kernel = 1 : i64} {
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : memref<8x64xf32>) attrs = {codegen.kernel = 2 : i64, codegen.scheduled}
// CHECK:         linalg.generic {{.*}} outs(%{{.*}} : memref<8x1xi1>) attrs = {codegen.kernel = 3 : i64, codegen.scheduled}
// CHECK-NOT:   transform.named_sequence @kernel_0_
// CHECK-NOT:   transform.named_sequence @kernel_1_
// CHECK:       transform.named_sequence @kernel_2_vector(
// CHECK:       transform.named_sequence @kernel_3_vector(

// The comparison and the select by element stay scalar loops (a byte per i1); the select by row
// reads its flag once per row and broadcasts it; the flags per row are written one at a time.
// APPLIED-LABEL: func.func @masks
// APPLIED:         scf.for
// APPLIED:           arith.cmpi ne, {{.*}} : i64
// APPLIED:           memref.store {{.*}} : memref<8x64xi1>
// APPLIED:         scf.for
// APPLIED:           memref.load {{.*}} : memref<8x64xi1>
// APPLIED:           arith.select {{.*}} : f32
// APPLIED:         vector.transfer_read {{.*}} : memref<8x1xi1>, vector<32xi1>
// APPLIED:         arith.select {{.*}} : vector<32xi1>, vector<32xf32>
// APPLIED:         vector.transfer_write {{.*}} : vector<1xi1>, memref<8x1xi1>

// In LLVM no vector of several i1 is loaded or stored.
// LLVM-LABEL: llvm.func @masks
// LLVM-NOT:     llvm.load {{.*}} -> vector<{{[0-9]*[02-9]|[1-9][0-9]+}}xi1>
// LLVM-NOT:     llvm.store {{.*}} : vector<{{[0-9]*[02-9]|[1-9][0-9]+}}xi1>
// LLVM:         llvm.return
func.func @masks(%x: memref<8x64xi64>, %m: memref<8x64xi1>, %a: memref<8x64xf32>, %o: memref<8x64xf32>,
                 %r: memref<8x1xi1>, %o2: memref<8x64xf32>, %r2: memref<8x1xi1>) {
  %zero = arith.constant 0 : i64
  %cst = arith.constant 0.0 : f32
  %true = arith.constant true
  // 0: a comparison writing a mask along the vectors: loops.
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x64xi64>) outs(%m : memref<8x64xi1>) {
  ^bb0(%v: i64, %out: i1):
    %c = arith.cmpi ne, %v, %zero : i64
    linalg.yield %c : i1
  }
  // 1: a select reading a mask along the vectors: loops.
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %a : memref<8x64xi1>, memref<8x64xf32>) outs(%o : memref<8x64xf32>) {
  ^bb0(%c: i1, %v: f32, %out: f32):
    %s = arith.select %c, %cst, %v : f32
    linalg.yield %s : f32
  }
  // 2: a select reading one flag per row (an attention row's "all masked"), broadcast: vectorised.
  linalg.generic {indexing_maps = [#rowmask, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %a : memref<8x1xi1>, memref<8x64xf32>) outs(%o2 : memref<8x64xf32>) {
  ^bb0(%c: i1, %v: f32, %out: f32):
    %s = arith.select %c, %cst, %v : f32
    linalg.yield %s : f32
  }
  // 3: one flag written per row (vectors of one element): vectorised.
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%r2 : memref<8x1xi1>) {
  ^bb0(%out: i1):
    linalg.yield %true : i1
  }
  return
}
