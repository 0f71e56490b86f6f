// RUN: vt-opt %s --split-input-file --verify-diagnostics --vt-lower-views | filecheck %s --check-prefixes=CHECK,SPLIT,SELECT-SPLIT,PRODUCER,STORE
// RUN: vt-opt %s --split-input-file --verify-diagnostics --vt-lower-views='min-piece=4' | filecheck %s --check-prefixes=SELECT
// RUN: not vt-opt %s --split-input-file --vt-lower-views='min-piece=-1' -o /dev/null 2>&1 | filecheck %s --check-prefix=SELECT-BAD

// The printer's aliases of the folded and gathered maps.
// CHECK-DAG: #[[ID:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[T:map[0-9]*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[HEAD:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1 mod 96)>
// CHECK-DAG: #[[TAIL:map[0-9]*]] = affine_map<(d0, d1) -> (d0, d1 + 32)>
// CHECK-DAG: #[[MM_A:map[0-9]*]] = affine_map<(d0, d1, d2) -> (d2, d0)>

#id2 = affine_map<(d0, d1) -> (d0, d1)>

// A single-piece view read by a generic folds into its indexing map: no vt.view, no copy.
// CHECK-LABEL: func.func @fold_transpose
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK-NOT:     vt.view
// CHECK:         linalg.generic {indexing_maps = [#[[T]], #[[ID]]]{{.*}} ins(%[[X]] : tensor<4x8xf32>)
func.func @fold_transpose(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %v = "vt.view"(%x) {mapping = [{map = affine_map<(d0, d1) -> (d1, d0)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %e = tensor.empty() : tensor<8x4xf32>
  %out = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%v : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<8x4xf32>
  return %out : tensor<8x4xf32>
}

// A slice at offset 0 would bring a bare d1 over a larger dimension (96 > 32) and change the loop
// bounds linalg infers; it is guarded as `d1 mod 96` (same value in range). The other slice folds
// as is.
// CHECK-LABEL: func.func @fold_slices
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<1x96xf32>
// CHECK-NOT:     vt.view
// CHECK:         linalg.generic {indexing_maps = [#[[HEAD]], #[[TAIL]], #[[ID]]]{{.*}} ins(%[[X]], %[[X]] : tensor<1x96xf32>, tensor<1x96xf32>)
func.func @fold_slices(%x: tensor<1x96xf32>) -> tensor<1x32xf32> {
  %q = "vt.view"(%x) {mapping = [{map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x96xf32>) -> tensor<1x32xf32>
  %k = "vt.view"(%x) {mapping = [{map = affine_map<(d0, d1) -> (d0, d1 + 32)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<1x96xf32>) -> tensor<1x32xf32>
  %e = tensor.empty() : tensor<1x32xf32>
  %out = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%q, %k : tensor<1x32xf32>, tensor<1x32xf32>) outs(%e : tensor<1x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.mulf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x32xf32>
  return %out : tensor<1x32xf32>
}

// Named ops are generalized first, then folded (the transposed operand of a matmul).
// CHECK-LABEL: func.func @fold_into_matmul
// CHECK-NOT:     vt.view
// CHECK:         linalg.generic {indexing_maps = [#[[MM_A]],
func.func @fold_into_matmul(%a: tensor<8x4xf32>, %b: tensor<8x5xf32>) -> tensor<4x5xf32> {
  %at = "vt.view"(%a) {mapping = [{map = affine_map<(d0, d1) -> (d1, d0)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %m = linalg.matmul ins(%at, %b : tensor<4x8xf32>, tensor<8x5xf32>) outs(%acc : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %m : tensor<4x5xf32>
}

// A returned view is materialised with a gather generic (data movement again, but correct).
// CHECK-LABEL: func.func @gather_returned
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK-NOT:     vt.view
// CHECK:         %[[G:.*]] = linalg.generic {indexing_maps = [#[[T]], #[[ID]]]{{.*}} ins(%[[X]] : tensor<4x8xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
// CHECK:         return %[[G]]
func.func @gather_returned(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %v = "vt.view"(%x) {mapping = [{map = affine_map<(d0, d1) -> (d1, d0)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %v : tensor<8x4xf32>
}

// A multi-piece view (concat) is materialised piece by piece into its box.
// CHECK-LABEL: func.func @gather_concat
// CHECK-SAME:    %[[A:[a-z0-9]+]]: tensor<2x8xf32>, %[[B:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK-NOT:     vt.view
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<6x8xf32>
// CHECK:         %[[P0:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<2x8xf32>)
// CHECK:         %[[R0:.*]] = tensor.insert_slice %[[P0]] into %[[E]][0, 0] [2, 8] [1, 1]
// CHECK:         %[[P1:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<4x8xf32>)
// CHECK:         %[[R1:.*]] = tensor.insert_slice %[[P1]] into %[[R0]][2, 0] [4, 8] [1, 1]
// CHECK:         return %[[R1]]
func.func @gather_concat(%a: tensor<2x8xf32>, %b: tensor<4x8xf32>) -> tensor<6x8xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 0>, hi = array<i64: 2>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 0>, hi = array<i64: 6>, lo = array<i64: 2>, map = affine_map<(d0, d1) -> (d0 - 2, d1)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  return %c : tensor<6x8xf32>
}

// -----

// SPLIT-DAG: #[[SHIFT3:.*]] = affine_map<(d0, d1) -> (d0, d1 + 3)>
// SPLIT-DAG: #[[MOD4:.*]] = affine_map<(d0) -> (d0 mod 4)>

// A multi-piece view (concat) read by a generic: the generic's loop range is split at the piece
// boundary (VTC §6): one clone per piece reads its source through the piece map and writes the
// matching slice of the output (its own fresh init), no gather.
// SPLIT-LABEL: func.func @split_concat_reader
// SPLIT-SAME:    %[[A:[a-z0-9]+]]: tensor<2x8xf32>, %[[B:[a-z0-9]+]]: tensor<4x8xf32>
// SPLIT-NOT:     vt.view
// SPLIT:         %[[E:.*]] = tensor.empty() : tensor<6x8xf32>
// SPLIT:         %[[S0:.*]] = tensor.extract_slice %[[E]][0, 0] [2, 8] [1, 1]
// SPLIT:         %[[P0:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<2x8xf32>) outs(%[[S0]] : tensor<2x8xf32>)
// SPLIT:           math.exp
// SPLIT:         %[[R0:.*]] = tensor.insert_slice %[[P0]] into %[[E]][0, 0] [2, 8] [1, 1]
// SPLIT:         %[[S1:.*]] = tensor.extract_slice %[[R0]][2, 0] [4, 8] [1, 1]
// SPLIT:         %[[P1:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<4x8xf32>) outs(%[[S1]] : tensor<4x8xf32>)
// SPLIT:           math.exp
// SPLIT:         %[[R1:.*]] = tensor.insert_slice %[[P1]] into %[[R0]][2, 0] [4, 8] [1, 1]
// SPLIT:         return %[[R1]]
func.func @split_concat_reader(%a: tensor<2x8xf32>, %b: tensor<4x8xf32>) -> tensor<6x8xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 0>, hi = array<i64: 2>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 0>, hi = array<i64: 6>, lo = array<i64: 2>, map = affine_map<(d0, d1) -> (d0 - 2, d1)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %e = tensor.empty() : tensor<6x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<6x8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  return %r : tensor<6x8xf32>
}

// The split dim read through a transposed map, beside a second full-size input: that input's
// map is shifted per piece (d1 + 3) and its bare dims guarded (mod) so loop bounds come from the
// output slice.
// SPLIT-LABEL: func.func @split_transposed_reader
// SPLIT-SAME:    %[[A:[a-z0-9]+]]: tensor<3x4xf32>, %[[B:[a-z0-9]+]]: tensor<5x4xf32>, %[[Y:[a-z0-9]+]]: tensor<4x8xf32>
// SPLIT:         linalg.generic {indexing_maps = [#[[T:.*]], #[[YM0:.*]], #[[ID:.*]]]{{.*}} ins(%[[A]], %[[Y]] : tensor<3x4xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4x3xf32>)
// SPLIT:         linalg.generic {indexing_maps = [#[[T]], #[[SHIFT3]], #[[ID]]]{{.*}} ins(%[[B]], %[[Y]] : tensor<5x4xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4x5xf32>)
func.func @split_transposed_reader(%a: tensor<3x4xf32>, %b: tensor<5x4xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 0>, hi = array<i64: 3>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 0>, hi = array<i64: 8>, lo = array<i64: 3>, map = affine_map<(d0, d1) -> (d0 - 3, d1)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<3x4xf32>, tensor<5x4xf32>) -> tensor<8x4xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%c, %y : tensor<8x4xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %s = arith.addf %v, %w : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// A tensor concatenated with itself (RoPE's torch.cat((f, f))) is one piece reading `d0 mod 4`:
// folded into the reader, no split.
// SPLIT-LABEL: func.func @periodic_concat
// SPLIT-SAME:    %[[F:[a-z0-9]+]]: tensor<4xf32>
// SPLIT:         %[[R:.*]] = linalg.generic {indexing_maps = [#[[MOD4]], #{{.*}}]{{.*}} ins(%[[F]] : tensor<4xf32>) outs(%{{.*}} : tensor<8xf32>)
// SPLIT-NOT:     tensor.insert_slice
// SPLIT:         return %[[R]]
func.func @periodic_concat(%f: tensor<4xf32>) -> tensor<8xf32> {
  %c = "vt.view"(%f, %f) {mapping = [{dims = array<i64: 0>, hi = array<i64: 4>, lo = array<i64: 0>, map = affine_map<(d0) -> (d0)>, source = 0 : i64}, {dims = array<i64: 0>, hi = array<i64: 8>, lo = array<i64: 4>, map = affine_map<(d0) -> (d0 - 4)>, source = 1 : i64}], operandSegmentSizes = array<i32: 2, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%c : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.cos %v : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// A split dim read by a reduction loop is not split (the view is gathered, correct).
// SPLIT-LABEL: func.func @reduction_over_pieces_gathered
// SPLIT:         tensor.insert_slice
// SPLIT:         tensor.insert_slice
// SPLIT:         linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
func.func @reduction_over_pieces_gathered(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> tensor<2xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 1>, hi = array<i64: 2>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 1>, hi = array<i64: 4>, lo = array<i64: 2>, map = affine_map<(d0, d1) -> (d0, d1 - 2)>, source = 1 : i64}], operandSegmentSizes = array<i32: 2, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2xf32>) -> tensor<2xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%c : tensor<2x4xf32>) outs(%f : tensor<2xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.addf %v, %o : f32
    linalg.yield %s : f32
  } -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

// A concat view whose first piece (2 rows) is narrower than min-piece: its reader is not split;
// one loop nest selects each element's piece (issue 3 point 5: "per-element select only where
// the pieces are finer than a tile"). Both sources are loaded at indices clamped into them.
// SELECT-LABEL: func.func @select_fine_pieces
// SELECT-SAME:    %[[A:[a-z0-9]+]]: tensor<2x8xf32>, %[[B:[a-z0-9]+]]: tensor<4x8xf32>
// SELECT-NOT:     vt.view
// SELECT-NOT:     tensor.insert_slice
// SELECT:         linalg.generic {{.*}} ins(%[[A]] : tensor<2x8xf32>) outs(%{{.*}} : tensor<6x8xf32>)
// SELECT:           %[[I0:.*]] = linalg.index 0 : index
// SELECT:           %[[I1:.*]] = linalg.index 1 : index
// SELECT:           %[[VB:.*]] = tensor.extract %[[B]]
// SELECT:           %[[VA:.*]] = tensor.extract %[[A]]
// SELECT:           %[[IN:.*]] = arith.andi
// SELECT:           %[[V:.*]] = arith.select %[[IN]], %[[VA]], %[[VB]] : f32
// SELECT:           math.exp %[[V]]
// SELECT-NOT:     linalg.generic
// SELECT-SPLIT-LABEL: func.func @select_fine_pieces
// SELECT-SPLIT:         tensor.insert_slice
// SELECT-SPLIT:         tensor.insert_slice
func.func @select_fine_pieces(%a: tensor<2x8xf32>, %b: tensor<4x8xf32>) -> tensor<6x8xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 0>, hi = array<i64: 2>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 0>, hi = array<i64: 6>, lo = array<i64: 2>, map = affine_map<(d0, d1) -> (d0 - 2, d1)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
  %e = tensor.empty() : tensor<6x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<6x8xf32>) outs(%e : tensor<6x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<6x8xf32>
  return %r : tensor<6x8xf32>
}

// The split dim is a reduction loop (a matmul reducing over a concat): split loops cannot take it
// and the view used to be gathered; the select form reads it in place.
// SELECT-LABEL: func.func @select_reduction_over_concat
// SELECT-NOT:     vt.view
// SELECT:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
// SELECT:           arith.select
// SELECT:           arith.mulf
// SELECT-SPLIT-LABEL: func.func @select_reduction_over_concat
// SELECT-SPLIT:         linalg.generic {{.*}} ins(%{{.*}} : tensor<3x2xf32>) outs(%{{.*}} : tensor<3x2xf32>)
// SELECT-SPLIT-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// SELECT-SPLIT-NEXT:      linalg.yield %[[IN]] : f32
func.func @select_reduction_over_concat(%a: tensor<3x2xf32>, %b: tensor<3x2xf32>, %w: tensor<4x5xf32>) -> tensor<3x5xf32> {
  %c = "vt.view"(%a, %b) {mapping = [{dims = array<i64: 1>, hi = array<i64: 2>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 1>, hi = array<i64: 4>, lo = array<i64: 2>, map = affine_map<(d0, d1) -> (d0, d1 - 2)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x5xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<3x5xf32>) -> tensor<3x5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%c, %w : tensor<3x4xf32>, tensor<4x5xf32>) outs(%acc : tensor<3x5xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<3x5xf32>
  return %r : tensor<3x5xf32>
}

// SELECT-BAD: error: vt-lower-views: min-piece must not be negative

// -----

// A multi-piece view (a concat of a matmul result and an argument) read by a reshape cannot be
// read through the mapping: its buffer is needed. The matmul -- nothing else reads its result --
// computes straight into its box of that buffer (its init a slice of the buffer, re-indexed); only
// the argument is copied (gathered) into the other box. No buffer of the matmul's own.
// PRODUCER-LABEL: func.func @concat_read_by_reshape
// PRODUCER-SAME:    (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x6xf32>, %[[Y:.*]]: tensor<4x2xf32>)
// PRODUCER-NOT:     vt.view
// PRODUCER:         %[[BUF:.*]] = tensor.empty() : tensor<4x8xf32>
// PRODUCER-NEXT:    %[[BOX:.*]] = tensor.extract_slice %[[BUF]][0, 0] [4, 6] [1, 1]
// PRODUCER-NEXT:    %[[ACC:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[BOX]] : tensor<4x6xf32>)
// PRODUCER-NEXT:    %[[MM:.*]] = linalg.generic
// PRODUCER-SAME:      ins(%[[X]], %[[W]] : tensor<4x8xf32>, tensor<8x6xf32>) outs(%[[ACC]] : tensor<4x6xf32>)
// PRODUCER:         %[[B1:.*]] = tensor.insert_slice %[[MM]] into %[[BUF]][0, 0] [4, 6] [1, 1]
// PRODUCER:         %[[COPY:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<4x2xf32>)
// PRODUCER:         %[[B2:.*]] = tensor.insert_slice %[[COPY]] into %[[B1]][0, 6] [4, 2] [1, 1]
// PRODUCER-NEXT:    tensor.expand_shape %[[B2]]
func.func @concat_read_by_reshape(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %y: tensor<4x2xf32>) -> tensor<2x2x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %a = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%acc : tensor<4x6xf32>) -> tensor<4x6xf32>
  %c = "vt.view"(%a, %y) {mapping = [{dims = array<i64: 1>, hi = array<i64: 6>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 1>, hi = array<i64: 8>, lo = array<i64: 6>, map = affine_map<(d0, d1) -> (d0, d1 - 6)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<4x6xf32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  %r = tensor.expand_shape %c [[0, 1], [2]] output_shape [2, 2, 8] : tensor<4x8xf32> into tensor<2x2x8xf32>
  return %r : tensor<2x2x8xf32>
}

// -----

// The matmul's result has another reader: it keeps its buffer and the view is gathered, piece by
// piece, as before.
// PRODUCER-LABEL: func.func @shared_producer_gathered
// PRODUCER:         %[[MM:.*]] = linalg.generic {{.*}} : tensor<4x8xf32>, tensor<8x6xf32>)
// PRODUCER:         linalg.generic {{.*}} ins(%[[MM]] : tensor<4x6xf32>)
// PRODUCER:         return
func.func @shared_producer_gathered(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %y: tensor<4x2xf32>) -> (tensor<2x2x8xf32>, tensor<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x6xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6xf32>) -> tensor<4x6xf32>
  %a = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x6xf32>) outs(%acc : tensor<4x6xf32>) -> tensor<4x6xf32>
  %c = "vt.view"(%a, %y) {mapping = [{dims = array<i64: 1>, hi = array<i64: 6>, lo = array<i64: 0>, map = affine_map<(d0, d1) -> (d0, d1)>, source = 0 : i64}, {dims = array<i64: 1>, hi = array<i64: 8>, lo = array<i64: 6>, map = affine_map<(d0, d1) -> (d0, d1 - 6)>, source = 1 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0>} : (tensor<4x6xf32>, tensor<4x2xf32>) -> tensor<4x8xf32>
  %r = tensor.expand_shape %c [[0, 1], [2]] output_shape [2, 2, 8] : tensor<4x8xf32> into tensor<2x2x8xf32>
  return %r, %a : tensor<2x2x8xf32>, tensor<4x6xf32>
}

// -----

// vt.store_into of a generic's result: the generic is re-indexed over the destination box and
// writes an extract_slice of the destination, put back in place (bufferizes to a subview).
// STORE-LABEL: func.func @store_direct
// STORE-SAME:    %[[X:[a-z0-9]+]]: tensor<2x4xf32>, %[[D:[a-z0-9]+]]: tensor<8x4xf32>
// STORE-NOT:     vt.store_into
// STORE:         %[[S:.*]] = tensor.extract_slice %[[D]][3, 0] [2, 4] [1, 1]
// STORE:         %[[G:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<2x4xf32>) outs(%[[S]] : tensor<2x4xf32>)
// STORE:           math.exp
// STORE:         %[[R:.*]] = tensor.insert_slice %[[G]] into %[[D]][3, 0] [2, 4] [1, 1]
// STORE:         return %[[R]]
func.func @store_direct(%x: tensor<2x4xf32>, %d: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %e = tensor.empty() : tensor<2x4xf32>
  %u = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %r = "vt.store_into"(%u, %d) {mapping = [{map = affine_map<(d0, d1) -> (d0 + 3, d1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// A transposed store (the producer's loops follow the destination: the input map is transposed).
// STORE-LABEL: func.func @store_transposed
// STORE:         tensor.extract_slice %{{.*}}[0, 1] [4, 2] [1, 1] : tensor<4x8xf32> to tensor<4x2xf32>
// STORE:         linalg.generic {indexing_maps = [#[[T:.*]], #{{.*}}]{{.*}} outs(%{{.*}} : tensor<4x2xf32>)
func.func @store_transposed(%x: tensor<2x4xf32>, %d: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<2x4xf32>
  %u = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %r = "vt.store_into"(%u, %d) {mapping = [{map = affine_map<(d0, d1) -> (d1, d0 + 1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// No producer to redirect (a function argument): the value is copied into the box (a gather).
// STORE-LABEL: func.func @store_argument_copied
// STORE-SAME:    %[[X:[a-z0-9]+]]: tensor<2x4xf32>, %[[D:[a-z0-9]+]]: tensor<8x4xf32>
// STORE:         %[[S:.*]] = tensor.extract_slice %[[D]][3, 0] [2, 4] [1, 1]
// STORE:         %[[G:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<2x4xf32>) outs(%[[S]] : tensor<2x4xf32>)
// STORE-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// STORE-NEXT:      linalg.yield %[[IN]] : f32
// STORE:         tensor.insert_slice %[[G]] into %[[D]][3, 0] [2, 4] [1, 1]
func.func @store_argument_copied(%x: tensor<2x4xf32>, %d: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %r = "vt.store_into"(%x, %d) {mapping = [{map = affine_map<(d0, d1) -> (d0 + 3, d1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// A strided store has no box image: refused, naming the op.
func.func @store_strided(%x: tensor<2x4xf32>, %d: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{cannot lower vt.store_into}}
  %r = "vt.store_into"(%x, %d) {mapping = [{map = affine_map<(d0, d1) -> (d0 * 2, d1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
