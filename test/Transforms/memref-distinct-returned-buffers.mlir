// RUN: vt-opt %s --split-input-file --memref-distinct-returned-buffers | filecheck %s
// RUN: vt-opt %s --split-input-file --pass-pipeline="builtin.module(memref-distinct-returned-buffers, buffer-results-to-out-params{modify-public-functions hoist-static-allocs})" | filecheck %s --check-prefix=OUT

// One buffer returned twice (`return y, y`, or two equal results merged by cse): the second result
// is a copy of its own, so hoisting gives each result its own out-parameter (without the pass,
// hoist-static-allocs left the second result pointing at the erased alloc).
// CHECK-LABEL: func.func @twice
// CHECK:         %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK:         linalg.fill
// CHECK:         %[[B:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT:    memref.copy %[[A]], %[[B]]
// CHECK-NEXT:    %[[C:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT:    memref.copy %[[A]], %[[C]]
// CHECK-NEXT:    return %[[A]], %[[B]], %[[C]]
// OUT-LABEL: func.func @twice
// OUT-SAME:    (%[[X:.*]]: f32, %[[O0:.*]]: memref<4xf32>, %[[O1:.*]]: memref<4xf32>, %[[O2:.*]]: memref<4xf32>)
// OUT:         linalg.fill ins(%[[X]] : f32) outs(%[[O0]] : memref<4xf32>)
// OUT:         memref.copy %[[O0]], %[[O1]]
// OUT:         memref.copy %[[O0]], %[[O2]]
// OUT-NEXT:    return
func.func @twice(%x: f32) -> (memref<4xf32>, memref<4xf32>, memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  linalg.fill ins(%x : f32) outs(%a : memref<4xf32>)
  return %a, %a, %a : memref<4xf32>, memref<4xf32>, memref<4xf32>
}

// -----

// Distinct results are left alone.
// CHECK-LABEL: func.func @distinct
// CHECK-NOT:     memref.copy
// CHECK:         return %arg0, %arg1
func.func @distinct(%a: memref<4xf32>, %b: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  return %a, %b : memref<4xf32>, memref<4xf32>
}

// -----

// A dynamic buffer's copy takes its sizes.
// CHECK-LABEL: func.func @dynamic
// CHECK:         %[[D:.*]] = memref.dim %arg0, %{{.*}} : memref<?x8xf32>
// CHECK-NEXT:    %[[B:.*]] = memref.alloc(%[[D]]) : memref<?x8xf32>
// CHECK-NEXT:    memref.copy %arg0, %[[B]]
// CHECK-NEXT:    return %arg0, %[[B]]
func.func @dynamic(%a: memref<?x8xf32>) -> (memref<?x8xf32>, memref<?x8xf32>) {
  return %a, %a : memref<?x8xf32>, memref<?x8xf32>
}
