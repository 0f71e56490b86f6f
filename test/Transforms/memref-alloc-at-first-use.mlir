// RUN: vt-opt %s --split-input-file --memref-alloc-at-first-use | filecheck %s

// memref-alloc-at-first-use (passes/memref_alloc_at_first_use.py), the buffer placement behind TeMCO's
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

// -----

// A buffer reused for a second value that is written piece by piece (a concat materialised by its
// producers, vt-lower-views): two ops write disjoint halves that together cover the buffer before
// anything reads it, so the second value gets its own allocation from the first of them on; the
// subview of the first half was made before the gap (`cse` merged the two values' equal subviews)
// and is made again on the new buffer.

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func private @use(memref<4x4xf32>)
func.func private @other()

// CHECK-LABEL: func.func @reused_buffer_covered_by_pieces
// CHECK:         %[[A:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK:         %[[S:.*]] = memref.subview %[[A]][0, 0] [2, 4] [1, 1]
// CHECK:         linalg.copy ins(%arg0 : memref<2x4xf32>) outs(%[[S]] :
// CHECK:         call @use(%[[A]])
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    call @other()
// CHECK-NEXT:    %[[B:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT:    %[[S2:.*]] = memref.subview %[[B]][0, 0] [2, 4] [1, 1]
// CHECK-NEXT:    linalg.copy ins(%arg1 : memref<2x4xf32>) outs(%[[S2]] :
// CHECK:         %[[T:.*]] = memref.subview %[[B]][2, 0] [2, 4] [1, 1]
// CHECK-NEXT:    linalg.generic {{.*}} ins(%arg0 : memref<2x4xf32>) outs(%[[T]] :
// CHECK:         call @use(%[[B]])
// CHECK-NEXT:    memref.dealloc %[[B]]
func.func @reused_buffer_covered_by_pieces(%x: memref<2x4xf32>, %y: memref<2x4xf32>) {
  %buf = memref.alloc() : memref<4x4xf32>
  %top = memref.subview %buf[0, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1]>>
  linalg.copy ins(%x : memref<2x4xf32>) outs(%top : memref<2x4xf32, strided<[4, 1]>>)
  %bottom = memref.subview %buf[2, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
  linalg.copy ins(%y : memref<2x4xf32>) outs(%bottom : memref<2x4xf32, strided<[4, 1], offset: 8>>)
  func.call @use(%buf) : (memref<4x4xf32>) -> ()
  func.call @other() : () -> ()
  linalg.copy ins(%y : memref<2x4xf32>) outs(%top : memref<2x4xf32, strided<[4, 1]>>)
  %bottom2 = memref.subview %buf[2, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<2x4xf32>) outs(%bottom2 : memref<2x4xf32, strided<[4, 1], offset: 8>>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %in : f32
    linalg.yield %r : f32
  }
  func.call @use(%buf) : (memref<4x4xf32>) -> ()
  memref.dealloc %buf : memref<4x4xf32>
  return
}

// -----

// Not split: the second value's first piece is written, then the buffer is read (the other half
// still holds the first value) before the rest is written.

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func private @use(memref<4x4xf32>)

// CHECK-LABEL: func.func @piece_then_read
// CHECK-COUNT-1: memref.alloc()
// CHECK-NOT:     memref.alloc()
func.func @piece_then_read(%x: memref<2x4xf32>, %y: memref<2x4xf32>) {
  %cst = arith.constant 1.0 : f32
  %buf = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%cst : f32) outs(%buf : memref<4x4xf32>)
  func.call @use(%buf) : (memref<4x4xf32>) -> ()
  %top = memref.subview %buf[0, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1]>>
  linalg.copy ins(%x : memref<2x4xf32>) outs(%top : memref<2x4xf32, strided<[4, 1]>>)
  func.call @use(%buf) : (memref<4x4xf32>) -> ()
  %bottom = memref.subview %buf[2, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
  linalg.copy ins(%y : memref<2x4xf32>) outs(%bottom : memref<2x4xf32, strided<[4, 1], offset: 8>>)
  func.call @use(%buf) : (memref<4x4xf32>) -> ()
  memref.dealloc %buf : memref<4x4xf32>
  return
}

// -----

// A reused buffer whose second value is read through a chain of views made before the gap (`cse`
// shares the packed-QKV collapse/subview chain between two transformer layers): the whole chain is
// made again on the new buffer, including the collapse that has no late use of its own; the late
// reader reads the new buffer, never the old one (freed at the gap).

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

func.func private @use_row(memref<4xf32, strided<[1], offset: 4>>)
func.func private @other()

// CHECK-LABEL: func.func @reused_buffer_view_chain
// CHECK:         %[[A:.*]] = memref.alloc() : memref<2x2x4xf32>
// CHECK:         call @use_row
// CHECK-NEXT:    memref.dealloc %[[A]]
// CHECK-NEXT:    call @other()
// CHECK-NEXT:    %[[B:.*]] = memref.alloc() : memref<2x2x4xf32>
// CHECK-NEXT:    %[[C:.*]] = memref.collapse_shape %[[B]]
// CHECK-NEXT:    %[[R:.*]] = memref.subview %[[C]][1, 0] [1, 4] [1, 1]
// CHECK-NEXT:    %[[R1:.*]] = memref.collapse_shape %[[R]]
// CHECK-NEXT:    linalg.generic {{.*}} outs(%[[B]] : memref<2x2x4xf32>)
// CHECK:         call @use_row(%[[R1]])
// CHECK-NEXT:    memref.dealloc %[[B]]
func.func @reused_buffer_view_chain(%x: memref<2x2x4xf32>) {
  %one = arith.constant 1.0 : f32
  %buf = memref.alloc() : memref<2x2x4xf32>
  %flat = memref.collapse_shape %buf [[0, 1], [2]] : memref<2x2x4xf32> into memref<4x4xf32>
  %row = memref.subview %flat[1, 0] [1, 4] [1, 1] : memref<4x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 4>>
  %row1 = memref.collapse_shape %row [[0, 1]] : memref<1x4xf32, strided<[4, 1], offset: 4>> into memref<4xf32, strided<[1], offset: 4>>
  linalg.fill ins(%one : f32) outs(%buf : memref<2x2x4xf32>)
  func.call @use_row(%row1) : (memref<4xf32, strided<[1], offset: 4>>) -> ()
  func.call @other() : () -> ()
  linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<2x2x4xf32>) outs(%buf : memref<2x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %in : f32
    linalg.yield %r : f32
  }
  func.call @use_row(%row1) : (memref<4xf32, strided<[1], offset: 4>>) -> ()
  memref.dealloc %buf : memref<2x2x4xf32>
  return
}

// -----

// Not in place: the elementwise op also reads its dying input through a view in its payload (a
// flipped row, `t[i] = t[i].flip(0)`), so writing the input's buffer would overwrite elements the
// payload reads later. The result keeps its own buffer.

#id = affine_map<(d0, d1) -> (d0, d1)>

func.func private @use(memref<4x4xf32>)

// CHECK-LABEL: func.func @gather_from_dying_input
// CHECK:         %[[A:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK:         %[[B:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[A]] : memref<4x4xf32>) outs(%[[B]] : memref<4x4xf32>)
func.func @gather_from_dying_input(%x: memref<4x4xf32>) {
  %c3 = arith.constant 3 : index
  %a = memref.alloc() : memref<4x4xf32>
  linalg.copy ins(%x : memref<4x4xf32>) outs(%a : memref<4x4xf32>)
  %b = memref.alloc() : memref<4x4xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x4xf32>) outs(%b : memref<4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %k = arith.subi %c3, %j : index
    %flipped = memref.load %a[%i, %k] : memref<4x4xf32>
    %r = arith.addf %in, %flipped : f32
    linalg.yield %r : f32
  }
  memref.dealloc %a : memref<4x4xf32>
  func.call @use(%b) : (memref<4x4xf32>) -> ()
  memref.dealloc %b : memref<4x4xf32>
  return
}

// -----

// Two kernels identical in text and location (the same unpacking line of a quantised Linear run for
// two layers) are two users: the second overwrites %t whole, so it gets a buffer of its own. (An
// `ir.Operation`'s hash is of its content and location; used as a key it merged the two, and the
// pass then freed a buffer before its last read: wrong results, seed 2611 case 5596.)

#id2 = affine_map<(d0, d1) -> (d0, d1)>

func.func private @keep(memref<4x1xi32>)

// CHECK-LABEL: func.func @identical_writers
// CHECK:         %[[T1:.*]] = memref.alloc() : memref<4x1xi32>
// CHECK-NEXT:    linalg.generic {{.*}} outs(%[[T1]] : memref<4x1xi32>)
// CHECK:         call @keep(%[[T1]])
// CHECK-NEXT:    memref.dealloc %[[T1]] : memref<4x1xi32>
// CHECK-NEXT:    %[[T2:.*]] = memref.alloc() : memref<4x1xi32>
// CHECK-NEXT:    linalg.generic {{.*}} outs(%[[T2]] : memref<4x1xi32>)
// CHECK:         call @keep(%[[T2]])
// CHECK-NEXT:    memref.dealloc %[[T2]] : memref<4x1xi32>
func.func @identical_writers(%src: memref<4x4xi32>) {
  %sv = memref.subview %src[0, 3] [4, 1] [1, 1] : memref<4x4xi32> to memref<4x1xi32, strided<[4, 1], offset: 3>>
  %t = memref.alloc() : memref<4x1xi32>
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%sv : memref<4x1xi32, strided<[4, 1], offset: 3>>) outs(%t : memref<4x1xi32>) {
  ^bb0(%in: i32, %out: i32):
    linalg.yield %in : i32
  } loc("quantize.py":7:1)
  func.call @keep(%t) : (memref<4x1xi32>) -> ()
  linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%sv : memref<4x1xi32, strided<[4, 1], offset: 3>>) outs(%t : memref<4x1xi32>) {
  ^bb0(%in: i32, %out: i32):
    linalg.yield %in : i32
  } loc("quantize.py":7:1)
  func.call @keep(%t) : (memref<4x1xi32>) -> ()
  memref.dealloc %t : memref<4x1xi32>
  return
}
