// RUN: vt-opt %s --vt-eliminate-data-movement='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=DECISION
// RUN: vt-opt %s --vt-eliminate-data-movement | filecheck %s
// RUN: vt-opt %s --vt-eliminate-data-movement --vt-lower-views | filecheck %s --check-prefix=LOWER

#id = affine_map<(d0, d1) -> (d0, d1)>

// Constant padding before a convolution (input-of-output, catalogue entry tensor.pad): the
// producer writes the interior of a buffer filled with the padding value; the pad disappears.
// DECISION-LABEL: points-to @pad_interior_written_by_producer:
// DECISION:       store linalg.generic -> tensor.pad: producer writes into the destination, map (d0, d1) -> (d0 + 1, d1 + 2)
// CHECK-LABEL: func.func @pad_interior_written_by_producer
// CHECK-NOT:     tensor.pad
// CHECK:         %[[C:.*]] = arith.constant 5.000000e-01 : f32
// CHECK:         %[[E:.*]] = linalg.generic
// CHECK:           math.exp
// CHECK:         %[[B:.*]] = tensor.empty() : tensor<4x6xf32>
// CHECK:         %[[F:.*]] = linalg.fill ins(%[[C]] : f32) outs(%[[B]] : tensor<4x6xf32>)
// CHECK:         %[[P:.*]] = "vt.store_into"(%[[E]], %[[F]]) {mapping = [{map = #{{.*}}, source = 0 : i64}]
// CHECK:         linalg.generic {{.*}} ins(%[[P]] : tensor<4x6xf32>)
// LOWER-LABEL: func.func @pad_interior_written_by_producer
// LOWER:         %[[S:.*]] = tensor.extract_slice %{{.*}}[1, 2] [2, 3] [1, 1] : tensor<4x6xf32> to tensor<2x3xf32>
// LOWER:         %[[E:.*]] = linalg.generic {{.*}} outs(%[[S]] : tensor<2x3xf32>)
// LOWER:           math.exp
// LOWER:         tensor.insert_slice %[[E]] into %{{.*}}[1, 2] [2, 3] [1, 1]
func.func @pad_interior_written_by_producer(%x: tensor<2x3xf32>) -> tensor<4x6xf32> {
  %c = arith.constant 0.5 : f32
  %e0 = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x3xf32>) outs(%e0 : tensor<2x3xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  %p = tensor.pad %r low[1, 2] high[1, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c : f32
  } : tensor<2x3xf32> to tensor<4x6xf32>
  %e1 = tensor.empty() : tensor<4x6xf32>
  %o = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<4x6xf32>) outs(%e1 : tensor<4x6xf32>) {
  ^bb0(%v: f32, %o2: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<4x6xf32>
  return %o : tensor<4x6xf32>
}

// The padded value is also read elsewhere: it must stay physical, the pad stays (reason printed).
// DECISION-LABEL: points-to @pad_kept_when_value_is_shared:
// DECISION:       keep tensor.pad@{{.*}}: func.return reads %{{.*}} whole
// CHECK-LABEL: func.func @pad_kept_when_value_is_shared
// CHECK:         tensor.pad
func.func @pad_kept_when_value_is_shared(%x: tensor<2x3xf32>) -> (tensor<4x6xf32>, tensor<2x3xf32>) {
  %c = arith.constant 0.5 : f32
  %e0 = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x3xf32>) outs(%e0 : tensor<2x3xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  %p = tensor.pad %r low[1, 2] high[1, 1] {
  ^bb0(%i: index, %j: index):
    tensor.yield %c : f32
  } : tensor<2x3xf32> to tensor<4x6xf32>
  return %p, %r : tensor<4x6xf32>, tensor<2x3xf32>
}
