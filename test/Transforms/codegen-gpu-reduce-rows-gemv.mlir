// RUN: vt-opt %s --codegen-gpu-reduce-rows --cse | filecheck %s

// A batch-1 Linear's W x as the gemv schedule annotates it: a warp per output row, 8 rows per block,
// vectors of 4 (codegen.row_vector): lane l reads W[row, 4l .. 4l+3], then 128 elements further
// (the row in 128-element steps, 8 vectors a trip), one vector.load of W and one of x each, their
// elements combined in order from -0.0; a 5-step butterfly; lane 0 adds the output's value.
// CHECK-LABEL: func.func @gemv
// CHECK-DAG:     %[[C32:.*]] = arith.constant 32 : index
// CHECK:         gpu.launch {{.*}} threads(%[[TX:[^,]*]], %[[TY:[^,]*]], {{.*}}) in ({{[^,]*}} = %[[C32]], {{.*}})
// CHECK:           %[[ID:.*]] = arith.constant -0.000000e+00 : f32
// CHECK:           %[[C4:.*]] = arith.constant 4 : index
// CHECK:           %[[START:.*]] = arith.muli %[[TX]], %[[C4]]
// CHECK:           %[[C1024:.*]] = arith.constant 1024 : index
// CHECK:           %[[ACC:.*]] = scf.for %[[K:.*]] = %[[START]] to %{{.*}} step %[[C1024]] iter_args(%[[A:.*]] = %[[ID]]) -> (f32)
// CHECK:             %[[XI:.*]] = affine.apply #{{.*}}(%{{.*}}, %[[K]])
// CHECK:             %[[X:.*]] = vector.load %arg0[%[[XI]]] : memref<4096xf32>, vector<4xf32>
// CHECK:             %[[W:.*]] = vector.load %arg1[%{{.*}}, %[[XI]]] : memref<512x4096xf32>, vector<4xf32>
// CHECK:             %[[X0:.*]] = vector.extract %[[X]][0] : f32 from vector<4xf32>
// CHECK:             %[[W0:.*]] = vector.extract %[[W]][0] : f32 from vector<4xf32>
// CHECK:             %[[P0:.*]] = arith.mulf %[[X0]], %[[W0]]
// CHECK:             %[[S0:.*]] = arith.addf %[[A]], %[[P0]]
// CHECK:             vector.extract %[[X]][1]
// CHECK:             vector.extract %[[X]][3]
// CHECK:             %[[C128:.*]] = arith.constant 128 : index
// CHECK:             %[[K1:.*]] = arith.addi %[[K]], %[[C128]]
// CHECK:             affine.apply #{{.*}}(%{{.*}}, %[[K1]])
// CHECK:             vector.load %arg0
// CHECK-COUNT-7:     vector.load %arg1
// CHECK-NOT:         vector.load
// CHECK:             scf.yield
// CHECK:           gpu.shuffle  xor %[[ACC]], %{{.*}}, %{{.*}} : f32
// CHECK-COUNT-4:   gpu.shuffle  xor
// CHECK-NOT:       gpu.shuffle
// CHECK:           scf.if
// CHECK:             %[[INIT:.*]] = memref.load %arg2
// CHECK:             arith.addf %[[INIT]], %{{.*}}
// CHECK:             memref.store
// CHECK-NOT:     linalg.generic
func.func @gemv(%x: memref<4096xf32>, %w: memref<512x4096xf32>, %y: memref<512xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x, %w : memref<4096xf32>, memref<512x4096xf32>) outs(%y : memref<512xf32>)
      attrs = {codegen.kernel = 1 : i64, codegen.row_threads = 32 : i64, codegen.rows_per_block = 8 : i64,
               codegen.row_vector = 4 : i64} {
  ^bb0(%in: f32, %in_w: f32, %out: f32):
    %p = arith.mulf %in, %in_w : f32
    %s = arith.addf %out, %p : f32
    linalg.yield %s : f32
  }
  return
}

// Decode's q K^T, rows of 32 f16 read in vectors of 8 (16 bytes): 4 lanes per row, 64 rows per
// block (8 per warp); the f16 products summed in f32; the butterfly over the row's 4 lanes only
// (offsets 2, 1).
// CHECK-LABEL: func.func @scores
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[C64:.*]] = arith.constant 64 : index
// CHECK:         gpu.launch {{.*}} threads({{.*}}) in ({{[^,]*}} = %[[C4]], {{[^,]*}} = %[[C64]], {{.*}})
// CHECK:           scf.for
// CHECK:             vector.load %arg0[{{.*}}] : memref<4x32xf16>, vector<8xf16>
// CHECK:             vector.load %arg1[{{.*}}] : memref<4x4096x32xf16, strided<[131072, 32, 1]>>, vector<8xf16>
// CHECK-COUNT-16:    arith.extf
// CHECK:             scf.yield
// CHECK:           arith.constant 2 : i32
// CHECK:           gpu.shuffle  xor
// CHECK:           arith.constant 1 : i32
// CHECK:           gpu.shuffle  xor
// CHECK-NOT:       gpu.shuffle
func.func @scores(%q: memref<4x32xf16>, %k: memref<4x4096x32xf16, strided<[131072, 32, 1]>>, %s: memref<4x4096xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<4x32xf16>, memref<4x4096x32xf16, strided<[131072, 32, 1]>>) outs(%s : memref<4x4096xf32>)
      attrs = {codegen.kernel = 2 : i64, codegen.row_threads = 4 : i64, codegen.rows_per_block = 64 : i64,
               codegen.row_vector = 8 : i64} {
  ^bb0(%a: f16, %b: f16, %out: f32):
    %a32 = arith.extf %a : f16 to f32
    %b32 = arith.extf %b : f16 to f32
    %p = arith.mulf %a32, %b32 : f32
    %r = arith.addf %out, %p : f32
    linalg.yield %r : f32
  }
  return
}
