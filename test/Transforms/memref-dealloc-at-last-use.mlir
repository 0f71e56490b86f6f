// RUN: vt-opt %s --memref-dealloc-at-last-use | filecheck %s

// Frees move up to just after the last op that touches the buffer or a view of it (uses inside
// regions count for the op that holds them); a buffer used to the end keeps its free there.
// CHECK-LABEL: func.func @straight_line
// CHECK:         %[[A:.*]] = memref.alloc() : memref<16xf32>
// CHECK:         %[[B:.*]] = memref.alloc() : memref<16xf32>
// CHECK:         linalg.copy ins(%arg0 : memref<16xf32>) outs(%[[A]] : memref<16xf32>)
// CHECK:         %[[V:.*]] = memref.expand_shape %[[A]]
// CHECK:         scf.for
// CHECK:           memref.load %[[V]]
// CHECK:         }
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    linalg.copy ins(%[[B]] : memref<16xf32>) outs(%arg1 : memref<16xf32>)
// CHECK-NEXT:    memref.dealloc %[[B]]
// CHECK-NEXT:    return
func.func @straight_line(%in: memref<16xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  linalg.copy ins(%in : memref<16xf32>) outs(%a : memref<16xf32>)
  %v = memref.expand_shape %a [[0, 1]] output_shape [4, 4] : memref<16xf32> into memref<4x4xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %v[%i, %i] : memref<4x4xf32>
    memref.store %x, %b[%i] : memref<16xf32>
  }
  linalg.copy ins(%b : memref<16xf32>) outs(%out : memref<16xf32>)
  memref.dealloc %a : memref<16xf32>
  memref.dealloc %b : memref<16xf32>
  return
}
