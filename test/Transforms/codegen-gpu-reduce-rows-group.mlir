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

// A whole softmax as one group, the fills of its row buffer members too: the max's fill, the max,
// the exp, the sum's fill (the bufferization reused the max's buffer for the sum) and the sum, then
// the division. A fill is a per-row member: thread 0 of the row stores the row's element, and no
// barrier follows it (the reduction's thread 0, the same thread, reads it back to combine its
// result with, as the unfused kernels did). The sum's fill waits at a barrier: the exp's threads
// read the max it overwrites.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME:    %[[X:[^:]*]]: memref<8x64xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         %[[BUF:.*]] = memref.alloc() : memref<8xf32>
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}}) threads(%[[TX:[^,]*]], %[[TY:[^,]*]], {{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c4{{.*}}, {{.*}})
// CHECK:           %[[FIRST:.*]] = arith.cmpi eq, %[[TX]], %{{.*}} : index
// CHECK:           scf.if %[[FIRST]] {
// CHECK:             memref.store %[[NINF:.*]], %[[BUF]][%{{.*}}] : memref<8xf32>
// CHECK-NOT:       gpu.barrier
// CHECK:           scf.for %{{.*}} = %[[TX]] to %{{.*}} iter_args
// CHECK:             memref.load %[[X]]
// CHECK:             arith.maximumf
// CHECK-COUNT-5:   gpu.shuffle xor
// CHECK:           scf.if
// CHECK:             %[[INIT:.*]] = memref.load %[[BUF]]
// CHECK:             %[[MAX:.*]] = arith.maximumf %{{.*}}, %[[INIT]]
// CHECK:             memref.store %[[MAX]], %[[BUF]]
// CHECK:           gpu.barrier
// CHECK:           scf.for
// CHECK:             math.exp
// CHECK:           gpu.barrier
// CHECK:           scf.if %{{.*}} {
// CHECK:             memref.store %[[ZERO:.*]], %[[BUF]][%{{.*}}] : memref<8xf32>
// CHECK-NOT:       gpu.barrier
// CHECK:           scf.for %{{.*}} = %[[TX]] to %{{.*}} iter_args
// CHECK:             arith.addf
// CHECK-COUNT-5:   gpu.shuffle xor
// CHECK:           scf.if
// CHECK:             %[[INIT2:.*]] = memref.load %[[BUF]]
// CHECK:             %[[SUM:.*]] = arith.addf %{{.*}}, %[[INIT2]]
// CHECK:             memref.store %[[SUM]], %[[BUF]]
// CHECK:           gpu.barrier
// CHECK:           scf.for
// CHECK:             arith.divf
// CHECK-NOT:       gpu.barrier
// CHECK:           gpu.terminator
// CHECK-NOT:     linalg.generic
// CHECK:         memref.dealloc %[[BUF]]
func.func @softmax(%x: memref<8x64xf32>, %y: memref<8x64xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %buf = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%buf : memref<8xf32>) attrs = {codegen.kernel = 0 : i64, codegen.row_group = 5 : i64} {
  ^bb0(%out: f32):
    linalg.yield %ninf : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x64xf32>) outs(%buf : memref<8xf32>) attrs = {codegen.kernel = 1 : i64, codegen.row_group = 5 : i64} {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %out : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %buf : memref<8x64xf32>, memref<8xf32>) outs(%y : memref<8x64xf32>)
      attrs = {codegen.kernel = 2 : i64, codegen.row_group = 5 : i64} {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %d = arith.subf %in, %mx : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      outs(%buf : memref<8xf32>) attrs = {codegen.kernel = 3 : i64, codegen.row_group = 5 : i64} {
  ^bb0(%out: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%y : memref<8x64xf32>) outs(%buf : memref<8xf32>) attrs = {codegen.kernel = 4 : i64, codegen.row_group = 5 : i64} {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %out : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%y, %buf : memref<8x64xf32>, memref<8xf32>) outs(%y : memref<8x64xf32>)
      attrs = {codegen.kernel = 5 : i64, codegen.row_group = 5 : i64, codegen.row_threads = 32 : i64, codegen.rows_per_block = 4 : i64} {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %r = arith.divf %in, %s : f32
    linalg.yield %r : f32
  }
  memref.dealloc %buf : memref<8xf32>
  return
}

// Rows in chunks (`codegen.row_vector`, `RowReductionSchedule`'s `row_vector_width`): an f32 row
// widened to f64 in chunks of 4 elements per thread (a vector<4xf32> load of x; the results stored
// as two vector<2xf64> into the shared row: the f64 buffer is private to the group, never written to
// global memory), then summed in chunks of 2 (vector<2xf64> loads of the shared row; thread tx
// combines elements 2tx, 2tx+1, then 2(tx + 32), ... in order). Chunks per trip as the rows allow,
// at most `codegen.row_chunks`: 2 for the copy (64 chunks of 4 over 32 threads), 4 for the sum.
// CHECK-LABEL: func.func @widen_then_sum
// CHECK:         gpu.launch blocks({{.*}}) threads(%[[TX:[^,]*]], %[[TY:[^,]*]], {{.*}}) in ({{.*}} = %c32{{.*}}, {{.*}} = %c4{{.*}}, {{.*}})
// CHECK:           %[[ROWS:.*]] = memref.alloc() : memref<4x256xf64, #gpu.address_space<workgroup>>
// CHECK:           %[[START:.*]] = arith.muli %[[TX]], %{{.*}} : index
// CHECK:           scf.for %[[K:.*]] = %[[START]] to %{{.*}} step %{{.*}} {
// CHECK:             %[[X0:.*]] = vector.load %arg0[%{{.*}}, %{{.*}}] : memref<8x256xf32>, vector<4xf32>
// CHECK:             %[[K1:.*]] = arith.addi %[[K]], %{{.*}} : index
// CHECK:             %[[X1:.*]] = vector.load %arg0[%{{.*}}, %{{.*}}] : memref<8x256xf32>, vector<4xf32>
// CHECK:             vector.extract %[[X0]][0]
// CHECK:             arith.extf
// CHECK:             %[[LOW:.*]] = vector.from_elements %{{.*}}, %{{.*}} : vector<2xf64>
// CHECK:             %[[HIGH:.*]] = vector.from_elements %{{.*}}, %{{.*}} : vector<2xf64>
// CHECK:             vector.store %[[LOW]], %[[ROWS]][%[[TY]], %[[K]]] : memref<4x256xf64, #gpu.address_space<workgroup>>, vector<2xf64>
// CHECK:             %[[K2:.*]] = arith.addi %[[K]], %{{.*}} : index
// CHECK:             vector.store %[[HIGH]], %[[ROWS]][%[[TY]], %[[K2]]]
// CHECK-NOT:         vector.store {{.*}} %arg
// CHECK:             vector.extract %[[X1]][0]
// CHECK:             vector.store {{.*}}, %[[ROWS]][%[[TY]], %[[K1]]]
// CHECK:           gpu.barrier
// CHECK:           scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK:             %[[D0:.*]] = vector.load %[[ROWS]][%[[TY]], %{{.*}}] : memref<4x256xf64, #gpu.address_space<workgroup>>, vector<2xf64>
// CHECK:             %[[E0:.*]] = vector.extract %[[D0]][0]
// CHECK:             %[[S0:.*]] = arith.addf %[[E0]], %{{.*}} : f64
// CHECK:             %[[E1:.*]] = vector.extract %[[D0]][1]
// CHECK:             arith.addf %[[E1]], %[[S0]] : f64
// CHECK-COUNT-3:     vector.load %[[ROWS]]
// CHECK:             scf.yield
// CHECK-COUNT-10:  gpu.shuffle xor
// CHECK:           gpu.terminator
// CHECK-NOT:     vector.load %arg1
func.func @widen_then_sum(%x: memref<8x256xf32>, %s: memref<8xf64>) {
  %d = memref.alloc() : memref<8x256xf64>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x256xf32>) outs(%d : memref<8x256xf64>)
      attrs = {codegen.kernel = 0 : i64, codegen.row_group = 1 : i64, codegen.row_vector = 4 : i64, codegen.row_chunks = 4 : i64} {
  ^bb0(%in: f32, %out: f64):
    %e = arith.extf %in : f32 to f64
    linalg.yield %e : f64
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%d : memref<8x256xf64>) outs(%s : memref<8xf64>)
      attrs = {codegen.kernel = 1 : i64, codegen.row_group = 1 : i64, codegen.row_threads = 32 : i64, codegen.rows_per_block = 4 : i64,
               codegen.row_vector = 2 : i64, codegen.row_chunks = 4 : i64} {
  ^bb0(%in: f64, %out: f64):
    %r = arith.addf %in, %out : f64
    linalg.yield %r : f64
  }
  memref.dealloc %d : memref<8x256xf64>
  return
}
