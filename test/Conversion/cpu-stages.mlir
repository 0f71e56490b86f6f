// The CPU lowering stage by stage: kernel level (memrefs, results as out-params), the kernels'
// schedules (transform IR), vector code, loops, LLVM; at -O 0, so no graph-level step runs first.
// RUN: vtmlir compile %s -O 0 --emit stages | filecheck %s --check-prefix=STAGES
// RUN: vtmlir compile %s -O 0 --emit kernels | filecheck %s --check-prefix=KERNELS
// RUN: vtmlir compile %s -O 0 --emit loops | filecheck %s --check-prefix=LOOPS
// RUN: vtmlir compile %s -O 0 | filecheck %s --check-prefix=LLVM
// RUN: not vtmlir compile %s -O 0 --emit ptx 2>&1 | filecheck %s --check-prefix=BAD

// STAGES:      graph
// STAGES-NEXT: kernels
// STAGES-NEXT: schedule
// STAGES-NEXT: vectors
// STAGES-NEXT: loops
// STAGES-NEXT: llvm

// KERNELS-LABEL: func.func @main(
// KERNELS-SAME:    memref<2x8xf32>, %{{.*}}: memref<8x2xf32>)
// KERNELS-NOT:     tensor<
// KERNELS:         linalg.generic

// The transpose and the erf are one kernel: the input read as one 2x8 tile, transposed by a
// shuffle, erf as a polynomial (codegen-approximate-math), not a libm call per element.
// LOOPS-LABEL: func.func @main(
// LOOPS:         vector.transfer_read {{.*}} : memref<2x8xf32>, vector<2x8xf32>
// LOOPS:         vector.shuffle
// LOOPS:         math.fma {{.*}} : vector<8x2xf32>
// LOOPS-NOT:     math.erf

// LLVM-NOT: @erff
// LLVM: llvm.func @main(
// LLVM: llvm.func @_mlir_ciface_main(

// BAD: error: nothing to emit called 'ptx'; choose one of: stages, graph, kernels, schedule, vectors, loops, llvm

func.func @main(%x: tensor<2x8xf32>) -> tensor<8x2xf32> {
  %e = tensor.empty() : tensor<8x2xf32>
  %t = linalg.transpose ins(%x : tensor<2x8xf32>) outs(%e : tensor<8x2xf32>) permutation = [1, 0]
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<8x2xf32>) outs(%e : tensor<8x2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.erf %in : f32
    linalg.yield %v : f32
  } -> tensor<8x2xf32>
  return %r : tensor<8x2xf32>
}
