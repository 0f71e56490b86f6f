// RUN: vt-opt %s --split-input-file --memref-alloc-at-first-use | filecheck %s

// memref-alloc-at-first-use (temco/alloc_at_first_use.py), the buffer placement behind TeMCO's
// measured peak (§2.2). Copies of a shared constant fill become fills of their targets, and the fill
// moves to the buffer's next reader: the zeros are not kept alive between the two convs.

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func private @use(memref<4x4xf32>)
func.func private @other()

// CHECK-LABEL: func.func @shared_fill
// CHECK-NOT:     linalg.copy
// CHECK:         %[[A:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT:    linalg.fill ins(%{{.*}} : f32) outs(%[[A]] : memref<4x4xf32>)
// CHECK-NEXT:    call @use(%[[A]])
// CHECK:         %[[B:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT:    linalg.fill ins(%{{.*}} : f32) outs(%[[B]] : memref<4x4xf32>)
// CHECK-NEXT:    call @use(%[[B]])
func.func @shared_fill() {
  %zero = arith.constant 0.0 : f32
  %fill = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%fill : memref<4x4xf32>)
  %a = memref.alloc() : memref<4x4xf32>
  linalg.copy ins(%fill : memref<4x4xf32>) outs(%a : memref<4x4xf32>)
  func.call @use(%a) : (memref<4x4xf32>) -> ()
  memref.dealloc %a : memref<4x4xf32>
  func.call @use(%fill) : (memref<4x4xf32>) -> ()
  memref.dealloc %fill : memref<4x4xf32>
  return
}

// -----

// A buffer reused for a second, unrelated value (one-shot bufferization puts every tensor of a
// shape into the one tensor.empty's buffer when it can) is split where the second value overwrites
// it whole: the first value's buffer is freed after its last use, not kept through the gap.

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func private @use(memref<4x4xf32>)
func.func private @other()

// CHECK-LABEL: func.func @reused_buffer
// CHECK:         %[[A:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK:         call @use(%[[A]])
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK:         %[[B:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%arg0 : memref<4x4xf32>) outs(%[[B]] : memref<4x4xf32>)
// CHECK:         call @use(%[[B]])
// CHECK-NEXT:    memref.dealloc %[[B]]
func.func @reused_buffer(%x: memref<4x4xf32>) {
  %one = arith.constant 1.0 : f32
  %buf = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%one : f32) outs(%buf : memref<4x4xf32>)
  func.call @use(%buf) : (memref<4x4xf32>) -> ()
  func.call @other() : () -> ()
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x4xf32>) outs(%buf : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %in : f32
    linalg.yield %r : f32
  }
  func.call @use(%buf) : (memref<4x4xf32>) -> ()
  memref.dealloc %buf : memref<4x4xf32>
  return
}

// -----

// An elementwise op whose input dies at it writes into that input's buffer (ReLU in place).

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func private @use(memref<4x4xf32>)
func.func private @other()

// CHECK-LABEL: func.func @relu_in_place
// CHECK:         %[[A:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic {{.*}} ins(%[[A]] : memref<4x4xf32>) outs(%[[A]] : memref<4x4xf32>)
// CHECK:         call @use(%[[A]])
// CHECK-NEXT:    memref.dealloc %[[A]]
func.func @relu_in_place(%x: memref<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<4x4xf32>
  linalg.copy ins(%x : memref<4x4xf32>) outs(%a : memref<4x4xf32>)
  %b = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x4xf32>) outs(%b : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.maximumf %in, %zero : f32
    linalg.yield %r : f32
  }
  memref.dealloc %a : memref<4x4xf32>
  func.call @use(%b) : (memref<4x4xf32>) -> ()
  memref.dealloc %b : memref<4x4xf32>
  return
}
