// RUN: vt-opt %s --codegen-gpu-reduce-rows | filecheck %s

// A row group (the first half of a softmax: the row max, then exp(x - max)) run by its last member:
// one launch, a warp per row and 4 rows per block. x, read by both members along whole rows, is
// cached in shared memory ([4 rows, 64]): the max reads each element from global memory once and
// keeps it; each thread combines its elements tx, tx + 32 (one trip: both loads in flight), a
// shuffle butterfly, lane 0 stores the max; a barrier; the exp reads x from shared memory and the
// max the block stored, and writes its result (read by no later member) to global memory only.
// CHECK-LABEL: func.func @max_then_exp
// CHECK-NOT:     linalg.generic
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}} = %c1{{.*}}, {{.*}} = %c1{{.*}}) threads(%[[TX:[^,]*]], %[[TY:[^,]*]], {{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c4{{.*}}, {{.*}} = %c1{{.*}})
// CHECK:           %[[ROWS:.*]] = memref.alloc() : memref<4x64xf32, #gpu.address_space<workgroup>>
// CHECK:           scf.for %[[K:.*]] = %[[TX]] to %{{.*}} step %{{.*}} iter_args
// CHECK:             %[[X0:.*]] = memref.load %arg0
// CHECK:             memref.store %[[X0]], %[[ROWS]][%[[TY]], %[[K]]]
// CHECK:             arith.maximumf %[[X0]]
// CHECK:             %[[X1:.*]] = memref.load %arg0
// CHECK:             memref.store %[[X1]], %[[ROWS]]
// CHECK:             arith.maximumf %[[X1]]
// CHECK-COUNT-5:   gpu.shuffle xor
// CHECK:           scf.if
// CHECK:             memref.load %arg1
// CHECK:             memref.store {{.*}}, %arg1
// CHECK:           gpu.barrier
// CHECK:           scf.for %[[J:.*]] = %[[TX]]
// CHECK:             %[[XS:.*]] = memref.load %[[ROWS]][%[[TY]], %[[J]]]
// CHECK:             %[[M:.*]] = memref.load %arg1
// CHECK:             %[[D:.*]] = arith.subf %[[XS]], %[[M]]
// CHECK:             %[[E:.*]] = math.exp %[[D]]
// CHECK:             memref.store %[[E]], %arg2
// CHECK-NOT:         memref.store {{.*}}, %[[ROWS]]
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
