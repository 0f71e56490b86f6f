// RUN: vt-opt %s --split-input-file --codegen-erase-dead-kernels | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// A chain of kernels whose last buffer nothing reads: the last kernel goes with its buffer, then the
// one before it (its only reader gone), through the view; the kernel writing the result stays.
// CHECK-LABEL: func.func @dead_chain
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic
// CHECK-SAME:      outs(%arg1 : memref<4x8xf32>)
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     memref.dealloc
// CHECK:         return
func.func @dead_chain(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %a = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%a : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  }
  %b = memref.alloc() : memref<4x8xf32>
  %view = memref.subview %b[0, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  %a_top = memref.subview %a[0, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a_top : memref<2x8xf32, strided<[8, 1]>>) outs(%view : memref<2x8xf32, strided<[8, 1]>>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  }
  memref.dealloc %b : memref<4x8xf32>
  memref.dealloc %a : memref<4x8xf32>
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Kept: a buffer that is read (copied into the result), and a kernel holding a check (its assert is
// an effect of its own) even though its buffer is never read.
// CHECK-LABEL: func.func @kept
// CHECK:         memref.alloc
// CHECK:         memref.alloc
// CHECK:         cf.assert
// CHECK:         memref.copy
// CHECK:         return
func.func @kept(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  %a = memref.alloc() : memref<4x8xf32>
  %c = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%c : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %zero = arith.constant 0.0 : f32
    %ok = arith.cmpf one, %in, %zero : f32
    cf.assert %ok, "unimplemented: tensor with zero element"
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%a : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %e = math.exp %in : f32
    linalg.yield %e : f32
  }
  memref.copy %a, %y : memref<4x8xf32> to memref<4x8xf32>
  memref.dealloc %c : memref<4x8xf32>
  memref.dealloc %a : memref<4x8xf32>
  return
}
