// RUN: vt-opt %s --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256})' | filecheck %s
// RUN: vt-opt %s --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256}, transform-interpreter, codegen-erase-schedule)' | filecheck %s --check-prefix=APPLIED
// RUN: vt-opt %s --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256 schedules=contraction:none}, transform-interpreter, codegen-erase-schedule)' | filecheck %s --check-prefix=OFF

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Every linalg op is tagged with its kernel id; the module gets one named sequence per scheduled
// kernel and @__transform_main applying them.
// CHECK:       module attributes {transform.with_named_sequence}
// CHECK-LABEL: func.func @kernels
// CHECK:         linalg.generic {{.*}} attrs = {codegen.kernel = 0 : i64, codegen.scheduled}
// CHECK:         linalg.generic {{.*}} attrs = {codegen.kernel = 1 : i64, codegen.scheduled}
// CHECK:         linalg.generic {{.*}} attrs = {codegen.kernel = 2 : i64, codegen.scheduled}
// CHECK:       transform.named_sequence @kernel_0_contraction(%{{.*}}: !transform.any_op {transform.consumed})
// CHECK:         transform.structured.tile_using_forall
// CHECK:         transform.structured.promote {{.*}}operands_to_promote = [1]{{.*}}use_alloca
// CHECK:         transform.structured.vectorize {{.*}}create_named_contraction
// CHECK:       transform.named_sequence @kernel_1_vector(
// CHECK:       transform.named_sequence @kernel_2_row_reduction(
// CHECK:       transform.named_sequence @__transform_main(%[[ROOT:.*]]: !transform.any_op {transform.readonly})
// CHECK:         %[[ALL:.*]] = transform.structured.match attributes {codegen.scheduled} in %[[ROOT]]
// CHECK:         %[[K:.*]]:3 = transform.split_handle %[[ALL]]
// CHECK:         transform.include @kernel_0_contraction failures(suppress) (%[[K]]#0)
// CHECK:         transform.structured.hoist_redundant_vector_transfers

// The contraction: the B panel (k-chunk 64 x 64 columns) packed on the stack row by row, then per
// 6-row tile its A block (6 x 64) packed, and a 6 x 16 register tile (two 8-lane registers per row)
// accumulated over k in registers, its vectors without the unit k dimension; the elementwise op and
// the row reduction become vector code; no linalg op and no transform IR is left.
// APPLIED-LABEL: func.func @kernels
// APPLIED-NOT:     codegen.kernel
// APPLIED:         memref.alloca() {alignment = 64 : i64} : memref<16384xi8>
// APPLIED:         vector.transfer_write {{.*}} : vector<64xf32>, memref<64x64xf32>
// APPLIED:         memref.alloca() {alignment = 64 : i64} : memref<1536xi8>
// APPLIED:         vector.transfer_write {{.*}} : vector<64xf32>, memref<6x64xf32>
// APPLIED:         scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<6x16xf32>)
// APPLIED:           arith.mulf {{.*}} : vector<6x16xf32>
// APPLIED:           arith.addf {{.*}} : vector<6x16xf32>
// APPLIED:         math.exp {{.*}} : vector<32xf32>
// APPLIED:         vector.reduction <add>, {{.*}} : vector<64xf32> into f32
// APPLIED-NOT:     linalg.generic
// APPLIED-NOT:     transform.named_sequence

// With the contraction schedule turned off, the matmul stays a linalg op (loops later).
// OFF-LABEL: func.func @kernels
// OFF:         linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "reduction"]}
// OFF-NOT:     codegen.kernel
func.func @kernels(%A: memref<24x64xf32>, %B: memref<64x64xf32>, %C: memref<24x64xf32>, %S: memref<24xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<24x64xf32>, memref<64x64xf32>) outs(%C : memref<24x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%C : memref<24x64xf32>) outs(%C : memref<24x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%C : memref<24x64xf32>) outs(%S : memref<24xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  }
  return
}
