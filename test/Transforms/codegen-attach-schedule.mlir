// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256})' | filecheck %s
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256}, transform-interpreter, codegen-erase-schedule)' | filecheck %s --check-prefix=APPLIED
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256 schedules=contraction:none}, transform-interpreter, codegen-erase-schedule)' | filecheck %s --check-prefix=OFF
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256}, transform-interpreter, codegen-erase-schedule, func.func(convert-linalg-to-loops))' | filecheck %s --check-prefix=I1-APPLIED
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256}, transform-interpreter, codegen-erase-schedule, func.func(convert-linalg-to-loops), convert-vector-to-scf{full-unroll=true}, expand-strided-metadata, lower-affine, finalize-memref-to-llvm, convert-scf-to-cf, convert-vector-to-llvm, convert-to-llvm, reconcile-unrealized-casts)' | filecheck %s --check-prefix=LLVM
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=512})' | filecheck %s --check-prefix=AVX512
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=256 strict=true})' | filecheck %s --check-prefix=STRICT
// RUN: vt-opt %s --split-input-file --pass-pipeline='builtin.module(codegen-attach-schedule{threads=1 vector-bits=512}, transform-interpreter, codegen-erase-schedule)' | filecheck %s --check-prefix=AVX512-APPLIED

// The `// -----` chunks are separate modules; the `<PREFIX>-LABEL: {{^}}// -----` lines keep each
// prefix's checks of the printed IR within the chunk they are written in.

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Every linalg op is tagged with its kernel id; @__transform_main holds each scheduled kernel's
// transform ops, on its handle in a nested sequence whose failures are suppressed (no named sequence
// and transform.include per kernel: a symbol lookup each). The exp, an epilogue of the matmul, runs
// in its tiles (`codegen.fused_into`): the contraction's ops tile it and fuse the loops; its own
// vector schedule is applied afterwards to whatever is left of it (nothing, where the fusion
// applied), once per op left (a foreach), the module marked where it runs.
// CHECK:       module attributes {transform.with_named_sequence}
// CHECK-LABEL: func.func @kernels
// CHECK:         linalg.generic {{.*}} attrs = {codegen.kernel = 0 : i64, codegen.scheduled}
// CHECK:         linalg.generic {{.*}} attrs = {codegen.fused_into = 0 : i64, codegen.kernel = 1 : i64}
// CHECK:         linalg.generic {{.*}} attrs = {codegen.kernel = 2 : i64, codegen.scheduled}
// CHECK-NOT:   transform.named_sequence @kernel_
// CHECK:       transform.named_sequence @__transform_main(%[[ROOT:.*]]: !transform.any_op {transform.readonly})
// CHECK:         %[[ALL:.*]] = transform.structured.match attributes {codegen.scheduled} in %[[ROOT]]
// CHECK:         %[[K:.*]]:2 = transform.split_handle %[[ALL]]
// CHECK:         transform.sequence %[[K]]#0 : !transform.any_op failures(suppress) {
// CHECK-NEXT:    ^bb0(%[[K0:.*]]: !transform.any_op):
// CHECK:           transform.structured.tile_using_forall %[[K0]]
// CHECK:           transform.structured.promote {{.*}}operands_to_promote = [1]{{.*}}use_alloca
// CHECK:           transform.structured.vectorize {{.*}}create_named_contraction
// CHECK:           transform.structured.match attributes {codegen.kernel = 1 : i64}
// CHECK:           transform.structured.tile_using_forall
// CHECK:           transform.loop.fuse_sibling
// CHECK:         transform.sequence %[[K]]#1 : !transform.any_op failures(suppress) {
// CHECK:           transform.structured.match attributes {codegen.kernel = 2 : i64}
// CHECK:         %[[EXP:.*]] = transform.structured.match attributes {codegen.kernel = 1 : i64} in %[[ROOT]]
// CHECK:         transform.foreach %[[EXP]] : !transform.any_op {
// CHECK-NEXT:    ^bb0(%[[EACH:.*]]: !transform.any_op):
// CHECK:           transform.annotate %{{.*}} "codegen.unfused.1"
// CHECK:           transform.sequence %[[EACH]] : !transform.any_op failures(suppress) {
// CHECK:             transform.structured.tile_using_forall
// CHECK:         transform.structured.hoist_redundant_vector_transfers
// CHECK-NOT:     transform.include

// With strict=true a kernel's ops are built on its handle itself: a failure propagates.
// STRICT:      transform.named_sequence @__transform_main(
// STRICT:        %[[K:.*]]:2 = transform.split_handle
// STRICT-NEXT:   transform.get_parent_op %[[K]]#0
// STRICT-NEXT:   transform.structured.tile_using_forall %[[K]]#0
// STRICT-NOT:    transform.sequence

// The contraction: the B panel (k-chunk 64 x all 256 columns: one N tile of `cache_n` columns) packed on
// the stack row by row, then per 6-row tile its A block (6 x 64) packed, and a 6 x 16 register tile (two 8-lane registers per row)
// accumulated over k in registers, its vectors without the unit k dimension; the elementwise op and
// the row reduction become vector code; no linalg op and no transform IR is left.
// APPLIED-LABEL: func.func @kernels
// APPLIED-NOT:     codegen.kernel
// APPLIED:         memref.alloca() {alignment = 64 : i64} : memref<65536xi8>
// APPLIED:         vector.transfer_write {{.*}} : vector<256xf32>, memref<64x256xf32>
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
func.func @kernels(%A: memref<24x64xf32>, %B: memref<64x256xf32>, %C: memref<24x256xf32>, %S: memref<24xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<24x64xf32>, memref<64x256xf32>) outs(%C : memref<24x256xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%C : memref<24x256xf32>) outs(%C : memref<24x256xf32>) {
  ^bb0(%x: f32, %o: f32):
    %e = math.exp %x : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%C : memref<24x256xf32>) outs(%S : memref<24xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----
// CHECK-LABEL: {{^}}// -----
// APPLIED-LABEL: {{^}}// -----
// OFF-LABEL: {{^}}// -----
// I1-APPLIED-LABEL: {{^}}// -----
// LLVM-LABEL: {{^}}// -----

// An A block that one register tile reads (nc = nr: N is 16 here) and that is one contiguous block
// of its buffer already (6 x 64, rows 64 apart) is read where it is, not packed; B's panel (rows 32
// apart, 16 wide: not whole rows) still is.
// A blocked convolution's tap is such a kernel (`w x cb` input rows, fb = 16 output channels per
// tile): packing its input rows cost a tenth of its time.
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>

// CHECK-LABEL: func.func @single_use_dense_a
// CHECK:       transform.named_sequence @__transform_main(
// CHECK:         transform.sequence
// CHECK:         transform.structured.promote {{.*}}operands_to_promote = [1]
// CHECK-NOT:     transform.structured.promote
// CHECK:         transform.structured.vectorize {{.*}}create_named_contraction
// APPLIED-LABEL: func.func @single_use_dense_a
// APPLIED:         memref.alloca() {alignment = 64 : i64} : memref<4096xi8>
// APPLIED-NOT:     memref.alloca
// APPLIED:         scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<6x16xf32>)
// APPLIED-NOT:     memref.alloca
// APPLIED:         return
func.func @single_use_dense_a(%A: memref<24x64xf32>, %B: memref<64x16xf32, strided<[32, 1]>>, %C: memref<24x16xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<24x64xf32>, memref<64x16xf32, strided<[32, 1]>>) outs(%C : memref<24x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----
// CHECK-LABEL: {{^}}// -----
// APPLIED-LABEL: {{^}}// -----
// OFF-LABEL: {{^}}// -----
// I1-APPLIED-LABEL: {{^}}// -----
// LLVM-LABEL: {{^}}// -----

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
// CHECK:       transform.named_sequence @__transform_main(
// CHECK:         %[[K:.*]]:2 = transform.split_handle
// CHECK:         transform.sequence %[[K]]#0
// CHECK:           transform.structured.match attributes {codegen.kernel = 2 : i64}
// CHECK:         transform.sequence %[[K]]#1
// CHECK:           transform.structured.match attributes {codegen.kernel = 3 : i64}
// CHECK-NOT:     codegen.kernel = {{[01]}} : i64

// The comparison and the select by element stay scalar loops (a byte per i1); the select by row
// reads its flag once per row and broadcasts it; the flags per row are written one at a time.
// I1-APPLIED-LABEL: func.func @masks
// I1-APPLIED:         scf.for
// I1-APPLIED:           arith.cmpi ne, {{.*}} : i64
// I1-APPLIED:           memref.store {{.*}} : memref<8x64xi1>
// I1-APPLIED:         scf.for
// I1-APPLIED:           memref.load {{.*}} : memref<8x64xi1>
// I1-APPLIED:           arith.select {{.*}} : f32
// I1-APPLIED:         vector.transfer_read {{.*}} : memref<8x1xi1>, vector<i1>
// I1-APPLIED:         vector.broadcast {{.*}} : vector<i1> to vector<32xi1>
// I1-APPLIED:         arith.select {{.*}} : vector<32xi1>, vector<32xf32>
// I1-APPLIED:         vector.transfer_write {{.*}} : vector<1xi1>, memref<8x1xi1>

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

// -----
// CHECK-LABEL: {{^}}// -----
// APPLIED-LABEL: {{^}}// -----
// OFF-LABEL: {{^}}// -----
// I1-APPLIED-LABEL: {{^}}// -----
// LLVM-LABEL: {{^}}// -----

// B's tiles are whole rows of B (N = 64 <= 256 columns), contiguous: its packed copy would have B's
// own layout, so a B on the stack (an im2col panel `[K, pixels]`) is read in place; A is still packed.
// A B from elsewhere (an argument, a weight) is packed all the same: C is a view in a model, upstream
// hoisting then leaves C's accumulators in the k loop, and LLVM keeps them in registers only where
// B's loads provably do not alias C (a stack buffer); read in place, a Linear's weight was slower.
#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
// APPLIED-LABEL: func.func @whole_rows
// APPLIED-NOT:     memref.alloca() {alignment = 64 : i64} : memref<16384xi8>
// APPLIED:         memref.alloca() {alignment = 64 : i64} : memref<1536xi8>
// APPLIED:         vector.transfer_write {{.*}} : vector<64xf32>, memref<6x64xf32>
// APPLIED:         memref.subview %{{.*}}[%{{.*}}, %{{.*}}] [1, 16] [1, 1] : memref<64x64xf32> to memref<1x16xf32, strided<[64, 1], offset: ?>>
// APPLIED-LABEL: func.func @whole_rows_of_an_argument
// APPLIED:         memref.alloca() {alignment = 64 : i64} : memref<16384xi8>
func.func @whole_rows(%A: memref<24x64xf32>, %C: memref<24x64xf32>) {
  %B = memref.alloca() : memref<64x64xf32>
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<24x64xf32>, memref<64x64xf32>) outs(%C : memref<24x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @whole_rows_of_an_argument(%A: memref<24x64xf32>, %B: memref<64x64xf32>, %C: memref<24x64xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<24x64xf32>, memref<64x64xf32>) outs(%C : memref<24x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// -----
// CHECK-LABEL: {{^}}// -----
// APPLIED-LABEL: {{^}}// -----
// OFF-LABEL: {{^}}// -----
// I1-APPLIED-LABEL: {{^}}// -----
// LLVM-LABEL: {{^}}// -----

// A blocked (nChw16c) convolution's tap: reduction over input channel blocks (d4) and the channels of
// a block (d5). Its A rows (`w x cb`) and B blocks (16 x 16) are contiguous: both are read in place,
// and the channel blocks are looped inside the register tile (tiled after M), so the accumulators stay
// in registers across all of them; each output element still sums block by block, channel by channel.
// With AVX-512 and FMA, two output channel blocks (d1) are side by side in an 8-row tile, unrolled.
#in = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2, d3, d5)>
#w = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d4, d5, d6)>
#out = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2, d3, d6)>
// CHECK-LABEL: func.func @blocked_convolution_tap
// CHECK:       transform.named_sequence @__transform_main(
// CHECK:         transform.sequence
// CHECK-NOT:     transform.structured.promote
// CHECK:         tile_using_for {{.*}} tile_sizes [0, 0, 0, 6, 0, 0, 0]
// CHECK-NOT:     transform.structured.promote
// CHECK:         tile_using_for {{.*}} tile_sizes [0, 0, 0, 0, 1, 0, 0]
// CHECK-NOT:     transform.structured.promote
// CHECK:         transform.structured.vectorize
// APPLIED-LABEL: func.func @blocked_convolution_tap
// APPLIED-NOT:     memref.alloca
// APPLIED:         scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<6x16xf32>)
// APPLIED-NEXT:      scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (vector<6x16xf32>)
// AVX512-LABEL: func.func @blocked_convolution_tap
// AVX512:         transform.structured.tile_using_forall {{.*}} tile_sizes [1, 2, 1, 0, 0, 0, 16]
// AVX512:         transform.loop.unroll {{.*}} {factor = 2 : i64}
// AVX512-APPLIED-LABEL: func.func @blocked_convolution_tap
// AVX512-APPLIED-NOT:     memref.alloca
// AVX512-APPLIED:         scf.for {{.*}} -> (vector<8x16xf32>, vector<8x16xf32>)
// AVX512-APPLIED-NEXT:      scf.for {{.*}} -> (vector<8x16xf32>, vector<8x16xf32>)
// AVX512-APPLIED-COUNT-2:     arith.mulf {{.*}} {codegen.fma} : vector<8x16xf32>
func.func @blocked_convolution_tap(%I: memref<1x2x2x8x16xf32>, %W: memref<2x2x16x16xf32>, %O: memref<1x2x2x8x16xf32>) {
  linalg.generic {indexing_maps = [#in, #w, #out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "parallel"]}
      ins(%I, %W : memref<1x2x2x8x16xf32>, memref<2x2x16x16xf32>) outs(%O : memref<1x2x2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
