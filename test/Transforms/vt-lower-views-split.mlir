// RUN: vt-opt %s --vt-lower-views | filecheck %s

// CHECK-DAG: #[[SHIFT3:.*]] = affine_map<(d0, d1) -> (d0, d1 + 3)>
// CHECK-DAG: #[[MOD4:.*]] = affine_map<(d0) -> (d0 mod 4)>

// A multi-piece view (concat) read by a generic: the generic's loop range is split at the piece
// boundary (VTC §6): one clone per piece reads its source through the piece map and writes the
// matching slice of the output (its own fresh init), no gather.
// CHECK-LABEL: func.func @split_concat_reader
// CHECK-SAME:    %[[A:[a-z0-9]+]]: tensor<2x8xf32>, %[[B:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK-NOT:     vt.view
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<6x8xf32>
// CHECK:         %[[S0:.*]] = tensor.extract_slice %[[E]][0, 0] [2, 8] [1, 1]
// CHECK:         %[[P0:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<2x8xf32>) outs(%[[S0]] : tensor<2x8xf32>)
// CHECK:           math.exp
// CHECK:         %[[R0:.*]] = tensor.insert_slice %[[P0]] into %[[E]][0, 0] [2, 8] [1, 1]
// CHECK:         %[[S1:.*]] = tensor.extract_slice %[[R0]][2, 0] [4, 8] [1, 1]
// CHECK:         %[[P1:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<4x8xf32>) outs(%[[S1]] : tensor<4x8xf32>)
// CHECK:           math.exp
// CHECK:         %[[R1:.*]] = tensor.insert_slice %[[P1]] into %[[R0]][2, 0] [4, 8] [1, 1]
// CHECK:         return %[[R1]]
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
// CHECK-LABEL: func.func @split_transposed_reader
// CHECK-SAME:    %[[A:[a-z0-9]+]]: tensor<3x4xf32>, %[[B:[a-z0-9]+]]: tensor<5x4xf32>, %[[Y:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[T:.*]], #[[YM0:.*]], #[[ID:.*]]]{{.*}} ins(%[[A]], %[[Y]] : tensor<3x4xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4x3xf32>)
// CHECK:         linalg.generic {indexing_maps = [#[[T]], #[[SHIFT3]], #[[ID]]]{{.*}} ins(%[[B]], %[[Y]] : tensor<5x4xf32>, tensor<4x8xf32>) outs(%{{.*}} : tensor<4x5xf32>)
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
// CHECK-LABEL: func.func @periodic_concat
// CHECK-SAME:    %[[F:[a-z0-9]+]]: tensor<4xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [#[[MOD4]], #{{.*}}]{{.*}} ins(%[[F]] : tensor<4xf32>) outs(%{{.*}} : tensor<8xf32>)
// CHECK-NOT:     tensor.insert_slice
// CHECK:         return %[[R]]
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
// CHECK-LABEL: func.func @reduction_over_pieces_gathered
// CHECK:         tensor.insert_slice
// CHECK:         tensor.insert_slice
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
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
