// RUN: vt-opt %s --split-input-file --memref-elide-temporary-copies | filecheck %s

// C3K2's residual add after VTC's concat stores (Fig. 11): it reads channels 4..8 of the concat
// buffer and its result goes to channels 8..12 of it. The regions are disjoint, so the add writes
// the buffer directly; the destination's view moves before it; temporary and copy disappear.
// CHECK-LABEL: func.func @disjoint_channels
// CHECK-SAME:    (%[[X:.*]]: memref<1x4x2x2xf32>)
// CHECK:         %[[BUF:.*]] = memref.alloc() : memref<1x12x2x2xf32>
// CHECK-NEXT:    %[[DST:.*]] = memref.subview %[[BUF]][0, 8, 0, 0] [1, 4, 2, 2] [1, 1, 1, 1]
// CHECK-NEXT:    linalg.generic
// CHECK-SAME:      ins(%[[BUF]], %[[X]] : memref<1x12x2x2xf32>, memref<1x4x2x2xf32>)
// CHECK-SAME:      outs(%[[DST]] : memref<1x4x2x2xf32, strided<[48, 4, 2, 1], offset: 32>>)
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     memref.copy
// CHECK:         return %[[BUF]]
#read = affine_map<(d0, d1, d2, d3) -> (d0, d1 + 4, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @disjoint_channels(%x: memref<1x4x2x2xf32>) -> memref<1x12x2x2xf32> {
  %buf = memref.alloc() : memref<1x12x2x2xf32>
  %tmp = memref.alloc() : memref<1x4x2x2xf32>
  linalg.generic {indexing_maps = [#read, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%buf, %x : memref<1x12x2x2xf32>, memref<1x4x2x2xf32>) outs(%tmp : memref<1x4x2x2xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  %dst = memref.subview %buf[0, 8, 0, 0] [1, 4, 2, 2] [1, 1, 1, 1] : memref<1x12x2x2xf32> to memref<1x4x2x2xf32, strided<[48, 4, 2, 1], offset: 32>>
  memref.copy %tmp, %dst : memref<1x4x2x2xf32> to memref<1x4x2x2xf32, strided<[48, 4, 2, 1], offset: 32>>
  return %buf : memref<1x12x2x2xf32>
}

// -----

// Several writers (a fill, then an accumulation that reads its init) all move to the destination;
// a read of the destination's buffer through a subview of another region is disjoint too, and so
// is a box split along an inner dim (linear offsets interleave, boxes do not).
// CHECK-LABEL: func.func @fill_then_accumulate_inner_dim
// CHECK:         %[[BUF:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK:         %[[DST:.*]] = memref.subview %[[BUF]][0, 4] [4, 4] [1, 1]
// CHECK-NEXT:    linalg.fill ins(%{{.*}} : f32) outs(%[[DST]] :
// CHECK-NEXT:    linalg.generic
// CHECK-SAME:      outs(%[[DST]] :
// CHECK-NOT:     memref.copy
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#red = affine_map<(d0, d1) -> (d0)>
func.func @fill_then_accumulate_inner_dim(%x: memref<4x4xf32>) -> memref<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %buf = memref.alloc() : memref<4x8xf32>
  linalg.fill ins(%zero : f32) outs(%buf : memref<4x8xf32>)
  %src = memref.subview %buf[0, 0] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  %tmp = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%tmp : memref<4x4xf32>)
  linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%src, %x : memref<4x4xf32, strided<[8, 1]>>, memref<4x4xf32>) outs(%tmp : memref<4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  }
  %dst = memref.subview %buf[0, 4] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1], offset: 4>>
  memref.copy %tmp, %dst : memref<4x4xf32> to memref<4x4xf32, strided<[8, 1], offset: 4>>
  return %buf : memref<4x8xf32>
}

// -----

// The writer reads the very channels the copy overwrites (a shifted read overlapping the
// destination): writing in place would read values it has already replaced. Kept.
// CHECK-LABEL: func.func @overlapping_read_kept
// CHECK:         %[[TMP:.*]] = memref.alloc() : memref<1x4x2x2xf32>
// CHECK:         linalg.generic
// CHECK-SAME:      outs(%[[TMP]] :
// CHECK:         memref.copy %[[TMP]]
#shift = affine_map<(d0, d1, d2, d3) -> (d0, d1 + 6, d2, d3)>
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @overlapping_read_kept() -> memref<1x12x2x2xf32> {
  %buf = memref.alloc() : memref<1x12x2x2xf32>
  %tmp = memref.alloc() : memref<1x4x2x2xf32>
  linalg.generic {indexing_maps = [#shift, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%buf : memref<1x12x2x2xf32>) outs(%tmp : memref<1x4x2x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  }
  %dst = memref.subview %buf[0, 8, 0, 0] [1, 4, 2, 2] [1, 1, 1, 1] : memref<1x12x2x2xf32> to memref<1x4x2x2xf32, strided<[48, 4, 2, 1], offset: 32>>
  memref.copy %tmp, %dst : memref<1x4x2x2xf32> to memref<1x4x2x2xf32, strided<[48, 4, 2, 1], offset: 32>>
  return %buf : memref<1x12x2x2xf32>
}

// -----

// An op between the writer and the copy reads the destination region (it must still see the old
// values); a read through reshapes touches buffer offsets 0..3 while the destination holds offsets
// 0, 1, 4, 5 (they overlap). Both keep the temporary.
// CHECK-LABEL: func.func @read_in_between_kept
// CHECK:         %[[TMP:.*]] = memref.alloc() : memref<4xf32>
// CHECK:         memref.copy %[[TMP]]
// CHECK-LABEL: func.func @reshaped_read_kept
// CHECK:         %[[TMP:.*]] = memref.alloc() : memref<2x2xf32>
// CHECK:         memref.copy %[[TMP]]
#idr = affine_map<(d0, d1) -> (d0, d1)>
func.func @read_in_between_kept(%x: memref<4xf32>, %y: memref<4xf32>) -> memref<8xf32> {
  %buf = memref.alloc() : memref<8xf32>
  %tmp = memref.alloc() : memref<4xf32>
  linalg.copy ins(%x : memref<4xf32>) outs(%tmp : memref<4xf32>)
  %dst = memref.subview %buf[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  linalg.copy ins(%dst : memref<4xf32, strided<[1], offset: 4>>) outs(%y : memref<4xf32>)
  memref.copy %tmp, %dst : memref<4xf32> to memref<4xf32, strided<[1], offset: 4>>
  return %buf : memref<8xf32>
}

func.func @reshaped_read_kept() -> memref<4x4xf32> {
  %buf = memref.alloc() : memref<4x4xf32>
  %flat = memref.collapse_shape %buf [[0, 1]] : memref<4x4xf32> into memref<16xf32>
  %view = memref.expand_shape %flat [[0, 1]] output_shape [8, 2] : memref<16xf32> into memref<8x2xf32>
  %rows = memref.subview %view[0, 0] [2, 2] [1, 1] : memref<8x2xf32> to memref<2x2xf32, strided<[2, 1]>>
  %tmp = memref.alloc() : memref<2x2xf32>
  linalg.generic {indexing_maps = [#idr, #idr], iterator_types = ["parallel", "parallel"]}
      ins(%rows : memref<2x2xf32, strided<[2, 1]>>) outs(%tmp : memref<2x2xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  %dst = memref.subview %buf[0, 0] [2, 2] [1, 1] : memref<4x4xf32> to memref<2x2xf32, strided<[4, 1]>>
  memref.copy %tmp, %dst : memref<2x2xf32> to memref<2x2xf32, strided<[4, 1]>>
  return %buf : memref<4x4xf32>
}

// -----

// A result returned through a reshape (`hoist-static-allocs` cannot make it the out-parameter):
// the copy into the out-parameter goes, its producers -- one writing a slice through a view of the
// temporary, one reading the temporary back -- work on the out-parameter reshaped to the
// temporary's shape.
// CHECK-LABEL: func.func @reshaped_result_into_out_param
// CHECK-SAME:    (%[[X:.*]]: memref<2x4xf32>, %[[OUT:.*]]: memref<2x2x4xf32>)
// CHECK-NEXT:    %[[T:.*]] = memref.collapse_shape %[[OUT]] {{\[\[}}0, 1], [2]] : memref<2x2x4xf32> into memref<4x4xf32>
// CHECK-NEXT:    %[[TOP:.*]] = memref.subview %[[T]][0, 0] [2, 4] [1, 1]
// CHECK-NEXT:    linalg.copy ins(%[[X]] : memref<2x4xf32>) outs(%[[TOP]] :
// CHECK-NEXT:    %[[BOTTOM:.*]] = memref.subview %[[T]][2, 0] [2, 4] [1, 1]
// CHECK-NEXT:    linalg.copy ins(%[[TOP]] : {{.*}}) outs(%[[BOTTOM]] :
// CHECK-NEXT:    return
func.func @reshaped_result_into_out_param(%x: memref<2x4xf32>, %out: memref<2x2x4xf32>) {
  %tmp = memref.alloc() : memref<4x4xf32>
  %top = memref.subview %tmp[0, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1]>>
  linalg.copy ins(%x : memref<2x4xf32>) outs(%top : memref<2x4xf32, strided<[4, 1]>>)
  %bottom = memref.subview %tmp[2, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
  linalg.copy ins(%top : memref<2x4xf32, strided<[4, 1]>>) outs(%bottom : memref<2x4xf32, strided<[4, 1], offset: 8>>)
  %r = memref.expand_shape %tmp [[0, 1], [2]] output_shape [2, 2, 4] : memref<4x4xf32> into memref<2x2x4xf32>
  memref.copy %r, %out : memref<2x2x4xf32> to memref<2x2x4xf32>
  memref.dealloc %tmp : memref<4x4xf32>
  return
}

// -----

// The same through a contiguous destination whose type is strided (the first row of the
// out-parameter, as `tril_indices` builds its result): the reshape back keeps the strided layout
// MLIR infers for it, and a cast gives the temporary's users the temporary's own type.
// CHECK-LABEL: func.func @reshaped_into_first_row
// CHECK-SAME:    (%[[X:.*]]: memref<5xi64>, %[[OUT:.*]]: memref<2x11xi64>)
// CHECK:         %[[ROW:.*]] = memref.subview %[[OUT]][0, 0] [1, 11] [1, 1] : memref<2x11xi64> to memref<1x11xi64, strided<[11, 1]>>
// CHECK-NEXT:    %[[FLAT:.*]] = memref.collapse_shape %[[ROW]] {{\[\[}}0, 1]] : memref<1x11xi64, strided<[11, 1]>> into memref<11xi64, strided<[1]>>
// CHECK-NEXT:    %[[T:.*]] = memref.cast %[[FLAT]] : memref<11xi64, strided<[1]>> to memref<11xi64>
// CHECK-NEXT:    %[[HEAD:.*]] = memref.subview %[[T]][0] [5] [1]
// CHECK-NEXT:    linalg.copy ins(%[[X]] : memref<5xi64>) outs(%[[HEAD]] :
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @reshaped_into_first_row(%x: memref<5xi64>, %out: memref<2x11xi64>) {
  %tmp = memref.alloc() : memref<11xi64>
  %head = memref.subview %tmp[0] [5] [1] : memref<11xi64> to memref<5xi64, strided<[1]>>
  linalg.copy ins(%x : memref<5xi64>) outs(%head : memref<5xi64, strided<[1]>>)
  %r = memref.expand_shape %tmp [[0, 1]] output_shape [1, 11] : memref<11xi64> into memref<1x11xi64>
  %row = memref.subview %out[0, 0] [1, 11] [1, 1] : memref<2x11xi64> to memref<1x11xi64, strided<[11, 1]>>
  memref.copy %r, %row : memref<1x11xi64> to memref<1x11xi64, strided<[11, 1]>>
  memref.dealloc %tmp : memref<11xi64>
  return
}

// -----

// The head of a 1-d out-parameter (the first part of a concat, issue 18: `x[3:6].repeat(3)` then
// `cat`): `strided<[1]>` has the identity map, so the expansion back has the default layout, the
// type the temporary already has (MLIR's verifier rejects `strided<[3, 1]>` there).
// CHECK-LABEL: func.func @reshaped_into_head_of_vector
// CHECK-SAME:    (%[[X:.*]]: memref<8xf32>, %[[OUT:.*]]: memref<17xf32>)
// CHECK:         %[[HEAD:.*]] = memref.subview %[[OUT]][0] [9] [1] : memref<17xf32> to memref<9xf32, strided<[1]>>
// CHECK-NEXT:    %[[T:.*]] = memref.expand_shape %[[HEAD]] {{\[\[}}0, 1]] output_shape [3, 3] : memref<9xf32, strided<[1]>> into memref<3x3xf32>
// CHECK-NOT:     memref.cast
// CHECK-NEXT:    linalg.generic
// CHECK-SAME:      outs(%[[T]] : memref<3x3xf32>)
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     memref.copy %{{.*}}, %[[HEAD]]
// CHECK:         return
#tile = affine_map<(d0, d1) -> (d1)>
#id22 = affine_map<(d0, d1) -> (d0, d1)>
func.func @reshaped_into_head_of_vector(%x: memref<8xf32>, %out: memref<17xf32>) {
  %part = memref.subview %x[3] [3] [1] : memref<8xf32> to memref<3xf32, strided<[1], offset: 3>>
  %tmp = memref.alloc() {alignment = 64 : i64} : memref<3x3xf32>
  linalg.generic {indexing_maps = [#tile, #id22], iterator_types = ["parallel", "parallel"]}
      ins(%part : memref<3xf32, strided<[1], offset: 3>>) outs(%tmp : memref<3x3xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  %flat = memref.collapse_shape %tmp [[0, 1]] : memref<3x3xf32> into memref<9xf32>
  %head = memref.subview %out[0] [9] [1] : memref<17xf32> to memref<9xf32, strided<[1]>>
  memref.copy %flat, %head : memref<9xf32> to memref<9xf32, strided<[1]>>
  %tail = memref.subview %out[9] [8] [1] : memref<17xf32> to memref<8xf32, strided<[1], offset: 9>>
  memref.copy %x, %tail : memref<8xf32> to memref<8xf32, strided<[1], offset: 9>>
  memref.dealloc %tmp : memref<3x3xf32>
  return
}

// -----

// A 0-d temporary expanded to 1x1 and copied into the first element of the out-parameter: undone by
// a collapse to 0-d, whose type keeps the (empty) strided layout MLIR infers for a strided source,
// then a cast to the temporary's type.
// CHECK-LABEL: func.func @scalar_into_first_element
// CHECK:         %[[E:.*]] = memref.subview %{{.*}}[0, 0] [1, 1] [1, 1] : memref<3x4xf32> to memref<1x1xf32, strided<[4, 1]>>
// CHECK-NEXT:    %[[S:.*]] = memref.collapse_shape %[[E]] [] : memref<1x1xf32, strided<[4, 1]>> into memref<f32, strided<[]>>
// CHECK-NEXT:    %[[T:.*]] = memref.cast %[[S]] : memref<f32, strided<[]>> to memref<f32>
// CHECK-NEXT:    linalg.fill ins(%{{.*}} : f32) outs(%[[T]] : memref<f32>)
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @scalar_into_first_element(%v: f32, %out: memref<3x4xf32>) {
  %tmp = memref.alloc() : memref<f32>
  linalg.fill ins(%v : f32) outs(%tmp : memref<f32>)
  %one = memref.expand_shape %tmp [] output_shape [1, 1] : memref<f32> into memref<1x1xf32>
  %elt = memref.subview %out[0, 0] [1, 1] [1, 1] : memref<3x4xf32> to memref<1x1xf32, strided<[4, 1]>>
  memref.copy %one, %elt : memref<1x1xf32> to memref<1x1xf32, strided<[4, 1]>>
  memref.dealloc %tmp : memref<f32>
  return
}

// -----

// A view of the temporary (its type follows the temporary's layout) with a strided destination:
// replacing the temporary would break the view's type. Kept.
// CHECK-LABEL: func.func @view_of_temporary_into_strided_kept
// CHECK:         %[[TMP:.*]] = memref.alloc() : memref<2x4xf32>
// CHECK:         memref.copy %[[TMP]]
func.func @view_of_temporary_into_strided_kept(%x: memref<1x4xf32>) -> memref<4x4xf32> {
  %buf = memref.alloc() : memref<4x4xf32>
  %tmp = memref.alloc() : memref<2x4xf32>
  %row = memref.subview %tmp[1, 0] [1, 4] [1, 1] : memref<2x4xf32> to memref<1x4xf32, strided<[4, 1], offset: 4>>
  linalg.copy ins(%x : memref<1x4xf32>) outs(%row : memref<1x4xf32, strided<[4, 1], offset: 4>>)
  %dst = memref.subview %buf[2, 0] [2, 4] [1, 1] : memref<4x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
  memref.copy %tmp, %dst : memref<2x4xf32> to memref<2x4xf32, strided<[4, 1], offset: 8>>
  return %buf : memref<4x4xf32>
}

// -----

// A temporary of one element copied into a [1, 1] slice of a [1, 2] out-parameter: the collapse
// back of a group of unit dimensions takes the stride of its first one, as MLIR infers it (the last
// one's, 1, did not verify).
// CHECK-LABEL: func.func @unit_group_into_strided_slice
// CHECK:         %[[S:.*]] = memref.subview %{{.*}}[0, 0] [1, 1] [1, 1] : memref<1x2xf32> to memref<1x1xf32, strided<[2, 1]>>
// CHECK-NEXT:    memref.collapse_shape %[[S]] {{\[\[}}0, 1]] : memref<1x1xf32, strided<[2, 1]>> into memref<1xf32, strided<[2]>>
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @unit_group_into_strided_slice(%out: memref<1x2xf32>) {
  %cst = arith.constant 0.0 : f32
  %tmp = memref.alloc() : memref<1xf32>
  linalg.fill ins(%cst : f32) outs(%tmp : memref<1xf32>)
  %r = memref.expand_shape %tmp [[0, 1]] output_shape [1, 1] : memref<1xf32> into memref<1x1xf32>
  %s = memref.subview %out[0, 0] [1, 1] [1, 1] : memref<1x2xf32> to memref<1x1xf32, strided<[2, 1]>>
  memref.copy %r, %s : memref<1x1xf32> to memref<1x1xf32, strided<[2, 1]>>
  memref.dealloc %tmp : memref<1xf32>
  return
}
