// RUN: vt-opt %s --codegen-gpu-reduce-rows --cse | filecheck %s

// A warp per row, 8 rows per block: each lane combines its elements (k = lane, lane + 32, ...)
// from the combiner's identity, 8 a trip (unrolled: 8 loads in flight; the order unchanged), a shuffle butterfly (16, 8, 4, 2, 1) reduces the warp, lane 0
// combines with the output's initial value and stores it.
// CHECK-LABEL: func.func @row_sum
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG:     %[[C32:.*]] = arith.constant 32 : index
// CHECK:         gpu.launch blocks(%[[BX:[^,]*]], {{.*}}) in ({{[^,]*}} = %[[C8]], {{.*}}) threads(%[[TX:[^,]*]], %[[TY:[^,]*]], {{.*}}) in ({{[^,]*}} = %[[C32]], {{[^,]*}} = %[[C8]], {{.*}})
// CHECK:           %[[R0:.*]] = arith.muli %[[BX]], %[[C8]]
// CHECK:           %[[ROW:.*]] = arith.addi %[[R0]], %[[TY]]
// CHECK:           %[[ID:.*]] = arith.constant -0.000000e+00 : f32
// CHECK:           %[[ACC:.*]] = scf.for %[[K:.*]] = %[[TX]] to %{{.*}} step %{{.*}} iter_args(%[[A:.*]] = %[[ID]]) -> (f32)
// CHECK:             %[[K1:.*]] = arith.addi %[[K]], %[[C32]]
// CHECK:             %[[X:.*]] = memref.load %arg0
// CHECK:             %[[E:.*]] = math.exp %[[X]]
// CHECK:             %[[S:.*]] = arith.addf %[[E]], %[[A]]
// CHECK:             %[[X1:.*]] = memref.load %arg0[{{.*}}]
// CHECK:             %[[E1:.*]] = math.exp %[[X1]]
// CHECK:             %[[S1:.*]] = arith.addf %[[E1]], %[[S]]
// CHECK-COUNT-6:     math.exp
// CHECK:             %[[S7:.*]] = arith.addf
// CHECK-NEXT:        scf.yield %[[S7]]
// CHECK:           gpu.shuffle  xor %[[ACC]], %{{.*}}, %{{.*}} : f32
// CHECK-COUNT-4:   gpu.shuffle  xor
// CHECK-NOT:       gpu.shuffle
// CHECK:           scf.if
// CHECK:             %[[INIT:.*]] = memref.load %arg1
// CHECK:             arith.addf %{{.*}}, %[[INIT]]
// CHECK:             memref.store
// CHECK:         } {codegen.kernel = 4 : i64}
// CHECK-NOT:     linalg.generic
func.func @row_sum(%x: memref<64x1024xf32>, %s: memref<64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x1024xf32>) outs(%s : memref<64xf32>)
      attrs = {codegen.kernel = 4 : i64, codegen.row_threads = 32 : i64, codegen.rows_per_block = 8 : i64} {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    %r = arith.addf %e, %out : f32
    linalg.yield %r : f32
  }
  return
}

// A block of 128 threads per row (4 warps): the warps' results meet in shared memory, after a
// barrier warp 0's first 4 lanes reduce them (offsets 2, 1). f64 values move as two 32-bit halves;
// the max starts at -inf.
// CHECK-LABEL: func.func @row_max_f64
// CHECK:         gpu.launch
// CHECK:           %[[SH:.*]] = memref.alloc() : memref<4xf64, #gpu.address_space<workgroup>>
// CHECK:           arith.constant 0xFFF0000000000000 : f64
// CHECK:           scf.for
// CHECK:             arith.maximumf
// CHECK-COUNT-10:  gpu.shuffle  xor {{.*}} : i32
// CHECK:           memref.store %{{.*}}, %[[SH]]
// CHECK:           gpu.barrier
// CHECK:           memref.load %[[SH]]
// CHECK-COUNT-4:   gpu.shuffle  xor {{.*}} : i32
// CHECK-NOT:       gpu.shuffle
// CHECK:         } {codegen.kernel = 7 : i64}
func.func @row_max_f64(%x: memref<2x8192xf64>, %s: memref<2xf64>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<2x8192xf64>) outs(%s : memref<2xf64>)
      attrs = {codegen.kernel = 7 : i64, codegen.row_threads = 128 : i64, codegen.rows_per_block = 1 : i64} {
  ^bb0(%in: f64, %out: f64):
    %r = arith.maximumf %in, %out : f64
    linalg.yield %r : f64
  }
  return
}
