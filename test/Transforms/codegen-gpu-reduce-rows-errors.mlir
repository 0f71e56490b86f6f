// RUN: not vt-opt %s --codegen-gpu-reduce-rows -o /dev/null 2>&1 | filecheck %s

// An annotated op whose output is not combined associatively is refused, named by its kernel id
// (the CUDA lowering then leaves that kernel to the naive mapping).
// CHECK: error: kernel 2: codegen-gpu-reduce-rows: not a row reduction: output #0 is combined by 'arith.subf'
func.func @not_associative(%x: memref<4x64xf32>, %s: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%s : memref<4xf32>)
      attrs = {codegen.kernel = 2 : i64, codegen.row_threads = 32 : i64, codegen.rows_per_block = 4 : i64} {
  ^bb0(%in: f32, %out: f32):
    %r = arith.subf %out, %in : f32
    linalg.yield %r : f32
  }
  return
}
