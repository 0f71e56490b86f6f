// RUN: vt-opt %s --codegen-inline-casts | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>

// LayerNorm's f64 copy of x, read by two reductions into buffers of their own: each reads x and
// widens it in its body.
// CHECK-LABEL: func.func @widened_twice
// CHECK-NOT:     memref<8x32xf64>
// CHECK:         linalg.generic {{.*}} ins(%[[X:.*]] : memref<8x32xf32>) outs(%{{.*}} : memref<8x1xf64>)
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %[[O:.*]]: f64):
// CHECK-NEXT:      %[[W:.*]] = arith.extf %[[A]] : f32 to f64
// CHECK-NEXT:      arith.addf %[[W]], %[[O]] : f64
// CHECK:         linalg.generic {{.*}} ins(%[[X]], %{{.*}} : memref<8x32xf32>, memref<8x1xf64>)
// CHECK-NEXT:    ^bb0(%[[B:.*]]: f32, %{{.*}}: f64, %{{.*}}: f64):
// CHECK-NEXT:      %[[V:.*]] = arith.extf %[[B]] : f32 to f64
// CHECK-NEXT:      arith.mulf %[[V]], %[[V]] : f64
func.func @widened_twice(%x: memref<8x32xf32>) {
  %wide = memref.alloc() : memref<8x32xf64>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x32xf32>) outs(%wide : memref<8x32xf64>) {
  ^bb0(%in: f32, %out: f64):
    %0 = arith.extf %in : f32 to f64
    linalg.yield %0 : f64
  }
  %sum = memref.alloc() : memref<8x1xf64>
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%wide : memref<8x32xf64>) outs(%sum : memref<8x1xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = arith.addf %in, %out : f64
    linalg.yield %0 : f64
  }
  %sq = memref.alloc() : memref<8x1xf64>
  linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%wide, %sum : memref<8x32xf64>, memref<8x1xf64>) outs(%sq : memref<8x1xf64>) {
  ^bb0(%in: f64, %s: f64, %out: f64):
    %0 = arith.mulf %in, %in : f64
    %1 = arith.addf %0, %out : f64
    linalg.yield %1 : f64
  }
  memref.dealloc %wide : memref<8x32xf64>
  memref.dealloc %sum : memref<8x1xf64>
  memref.dealloc %sq : memref<8x1xf64>
  return
}

// The source is written between the cast and its reader: the cast kernel stays.
// CHECK-LABEL: func.func @source_overwritten
// CHECK:         memref.alloc() : memref<8x32xf64>
// CHECK:         arith.extf
func.func @source_overwritten(%x: memref<8x32xf32>, %sum: memref<8x1xf64>) {
  %zero = arith.constant 0.0 : f32
  %wide = memref.alloc() : memref<8x32xf64>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x32xf32>) outs(%wide : memref<8x32xf64>) {
  ^bb0(%in: f32, %out: f64):
    %0 = arith.extf %in : f32 to f64
    linalg.yield %0 : f64
  }
  linalg.fill ins(%zero : f32) outs(%x : memref<8x32xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%wide : memref<8x32xf64>) outs(%sum : memref<8x1xf64>) {
  ^bb0(%in: f64, %out: f64):
    %0 = arith.addf %in, %out : f64
    linalg.yield %0 : f64
  }
  memref.dealloc %wide : memref<8x32xf64>
  return
}

// A reader writes the source (in place): reading the source there would read what it wrote.
// CHECK-LABEL: func.func @reader_writes_source
// CHECK:         memref.alloc() : memref<8x32xf64>
// CHECK:         arith.extf
func.func @reader_writes_source(%x: memref<8x32xf32>) {
  %wide = memref.alloc() : memref<8x32xf64>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x32xf32>) outs(%wide : memref<8x32xf64>) {
  ^bb0(%in: f32, %out: f64):
    %0 = arith.extf %in : f32 to f64
    linalg.yield %0 : f64
  }
  linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%wide : memref<8x32xf64>) outs(%x : memref<8x32xf32>) {
  ^bb0(%in: f64, %out: f32):
    %0 = arith.truncf %in : f64 to f32
    linalg.yield %0 : f32
  }
  memref.dealloc %wide : memref<8x32xf64>
  return
}
