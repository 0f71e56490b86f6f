// RUN: vt-opt %s --codegen-gpu-reduce-rows | filecheck %s

// A row group (the first half of a softmax: the row max, then exp(x - max)) run by its last member:
// one launch, a warp per row and 4 rows per block; each thread combines its elements tx, tx + 32, ...
// of the row, a shuffle butterfly, lane 0 stores the max; a barrier; then each thread computes its
// elements of the row again, reading the max the block stored.
// CHECK-LABEL: func.func @max_then_exp
// CHECK-NOT:     linalg.generic
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c4{{.*}}, {{.*}} = %c1{{.*}})
// CHECK:           scf.for {{.*}} iter_args
// CHECK:             memref.load %arg0
// CHECK:             arith.maximumf
// CHECK-COUNT-5:   gpu.shuffle xor
// CHECK:           scf.if
// CHECK:             memref.load %arg1
// CHECK:             memref.store {{.*}}, %arg1
// CHECK:           gpu.barrier
// CHECK:           scf.for
// CHECK:             memref.load %arg0
// CHECK:             memref.load %arg1
// CHECK:             arith.subf
// CHECK:             math.exp
// CHECK:             memref.store {{.*}}, %arg2
// CHECK:           gpu.terminator
// CHECK-NOT:     linalg.generic
func.func @max_then_exp(%x: memref<8x64xf32>, %m: memref<8xf32>, %e: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x64xf32>) outs(%m : memref<8xf32>) attrs = {codegen.kernel = 1 : i64, codegen.row_group = 2 : i64} {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %out : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<8x64xf32>, memref<8xf32>) outs(%e : memref<8x64xf32>)
      attrs = {codegen.kernel = 2 : i64, codegen.row_group = 2 : i64, codegen.row_threads = 32 : i64, codegen.rows_per_block = 4 : i64} {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %d = arith.subf %in, %mx : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  }
  return
}
