// RUN: vt-opt %s --vt-eliminate-data-movement='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=DECISION
// RUN: vt-opt %s --vt-eliminate-data-movement | filecheck %s
// RUN: vt-opt %s --vt-eliminate-data-movement --vt-lower-views | filecheck %s --check-prefix=LOWER

#id = affine_map<(d0, d1) -> (d0, d1)>
#red_in = affine_map<(d0, d1, d2) -> (d0, d2)>
#red_w = affine_map<(d0, d1, d2) -> (d2, d1)>
#red_out = affine_map<(d0, d1, d2) -> (d0, d1)>

// VTC §4.4 / Fig. 11 (C3K2): a split, a layer on one half, the halves and its output concatenated
// and reduced over by a matmul-like reader (which could only read a view by gathering it). Both
// producers write into the concat buffer; the half the layer reads is read back from the buffer
// through a view (the conflict: another reader of a stored element).
// DECISION-LABEL: points-to @c3k2_like:
// DECISION:       concat-store tensor.concat -> %{{.*}}: 2 producer(s) write into the concat buffer, 0 input(s) copied
// DECISION-NEXT:    %[[A:.*]] written by linalg.generic -> tensor.extract_slice, map (d0, d1) -> (d0, d1)
// DECISION-NEXT:    %{{.*}} written by linalg.generic, map (d0, d1) -> (d0, d1 + 8)
// DECISION-NEXT:    the concat buffer is needed: a linalg.generic reads the concat dim other than as a parallel loop
// CHECK-LABEL: func.func @c3k2_like
// CHECK-NOT:     tensor.concat
// CHECK:         %[[BUF:.*]] = tensor.empty() : tensor<2x12xf32>
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:           math.exp
// CHECK:         %[[S1:.*]] = "vt.store_into"(%[[A]], %[[BUF]])
// CHECK-NOT:     "vt.view"(%[[S1]]) {{.*}} -> tensor<2x8xf32>
// CHECK:         %[[HALF:.*]] = "vt.view"(%[[S1]]) {mapping = [{map = #{{.*}}, source = 0 : i64}]{{.*}} : (tensor<2x12xf32>) -> tensor<2x4xf32>
// CHECK:         %[[B:.*]] = linalg.generic {{.*}} ins(%[[HALF]] : tensor<2x4xf32>)
// CHECK:           arith.negf
// CHECK:         %[[S2:.*]] = "vt.store_into"(%[[B]], %[[S1]])
// CHECK:         linalg.generic {{.*}} ins(%[[S2]], %{{.*}} : tensor<2x12xf32>, tensor<12x3xf32>)
// LOWER-LABEL: func.func @c3k2_like
// LOWER:         %[[BUF:.*]] = tensor.empty() : tensor<2x12xf32>
// LOWER:         %[[I1:.*]] = tensor.extract_slice %[[BUF]][0, 0] [2, 8] [1, 1]
// LOWER:         %[[A:.*]] = linalg.generic {{.*}} outs(%[[I1]] : tensor<2x8xf32>)
// LOWER:           math.exp
// LOWER:         %[[R1:.*]] = tensor.insert_slice %[[A]] into %[[BUF]][0, 0] [2, 8] [1, 1]
// LOWER:         %[[I2:.*]] = tensor.extract_slice %[[R1]][0, 8] [2, 4] [1, 1]
// LOWER:         %[[B:.*]] = linalg.generic {{.*}} ins(%[[R1]] : tensor<2x12xf32>) outs(%[[I2]] : tensor<2x4xf32>)
// LOWER:           arith.negf
// LOWER:         %[[R2:.*]] = tensor.insert_slice %[[B]] into %[[R1]][0, 8] [2, 4] [1, 1]
// LOWER-NOT:     "vt.
func.func @c3k2_like(%x: tensor<2x8xf32>, %w: tensor<12x3xf32>) -> tensor<2x3xf32> {
  %e0 = tensor.empty() : tensor<2x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%e0 : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %lo = tensor.extract_slice %a[0, 0] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %hi = tensor.extract_slice %a[0, 4] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %e1 = tensor.empty() : tensor<2x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%hi : tensor<2x4xf32>) outs(%e1 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %c = tensor.concat dim(1) %lo, %hi, %b : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x12xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<2x3xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %y = linalg.generic {indexing_maps = [#red_in, #red_w, #red_out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%c, %w : tensor<2x12xf32>, tensor<12x3xf32>) outs(%acc : tensor<2x3xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// The form a torch.cat lowering may take: insert_slices into one tensor.empty. The producer
// computed before the chain writes the buffer; the function argument is copied into its box.
// DECISION-LABEL: points-to @insert_chain:
// DECISION:       concat-store tensor.insert_slice -> %{{.*}}: 1 producer(s) write into the concat buffer, 1 input(s) copied
// DECISION:         input %{{.*}} copied: the stored value is a function argument (no producer to redirect)
// CHECK-LABEL: func.func @insert_chain
// CHECK-NOT:     tensor.insert_slice
// CHECK-SAME:    (%{{.*}}: tensor<2x4xf32>, %[[Y:.*]]: tensor<2x3xf32>)
// CHECK:         %[[BUF:.*]] = tensor.empty() : tensor<2x7xf32>
// CHECK:         %[[S1:.*]] = "vt.store_into"(%[[Y]], %[[BUF]])
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:         %[[S2:.*]] = "vt.store_into"(%[[A]], %[[S1]])
// CHECK:         return %[[S2]]
// LOWER-LABEL: func.func @insert_chain
// LOWER:         linalg.generic {{.*}} ins(%{{.*}} : tensor<2x3xf32>) outs(%{{.*}} : tensor<2x3xf32>)
// LOWER-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// LOWER-NEXT:      linalg.yield %[[IN]] : f32
// LOWER:         linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// LOWER:           math.exp
func.func @insert_chain(%x: tensor<2x4xf32>, %y: tensor<2x3xf32>) -> tensor<2x7xf32> {
  %e0 = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x7xf32>
  %i0 = tensor.insert_slice %a into %e[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> into tensor<2x7xf32>
  %i1 = tensor.insert_slice %y into %i0[0, 4] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<2x7xf32>
  return %i1 : tensor<2x7xf32>
}

// Every reader reads the concat through parallel loops: the output-of-input view needs no buffer
// at all (split loops), so the concat is left to the greedy.
// DECISION-LABEL: points-to @concat_left_to_views:
// DECISION:       keep tensor.concat@{{.*}}: every reader can read the concat as a view
// CHECK-LABEL: func.func @concat_left_to_views
// CHECK-NOT:     vt.store_into
// CHECK:         "vt.view"
func.func @concat_left_to_views(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %e0 = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %c = tensor.concat dim(1) %a, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  %e1 = tensor.empty() : tensor<2x8xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<2x8xf32>) outs(%e1 : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// Stores fanning out through a concat: the concat is only written into a cache slot (a slice
// update), so each input's producer writes its part of the slot; neither the concat nor the
// insert is left. The key's producer writes rows 0..1 of the slot, the argument is copied.
// DECISION-LABEL: points-to @fan_out_into_cache:
// DECISION:       concat-store tensor.insert_slice -> %{{.*}}: 1 producer(s) write into the concat buffer, 1 input(s) copied
// DECISION-NEXT:    %{{.*}} written by linalg.generic, map (d0, d1) -> (d0, d1 + 5)
// DECISION-NEXT:    %{{.*}} copied, map (d0, d1) -> (d0 + 2, d1 + 5)
// DECISION-NEXT:    the concat fans out into the tensor.insert_slice's destination
// CHECK-LABEL: func.func @fan_out_into_cache
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4xf32>, %[[Y:.*]]: tensor<1x4xf32>, %[[CACHE:.*]]: tensor<3x16xf32>)
// CHECK-NOT:     tensor.concat
// CHECK-NOT:     tensor.insert_slice
// CHECK:         %[[S1:.*]] = "vt.store_into"(%[[Y]], %[[CACHE]])
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:         %[[S2:.*]] = "vt.store_into"(%[[A]], %[[S1]])
// CHECK:         return %[[S2]]
// LOWER-LABEL: func.func @fan_out_into_cache
// LOWER:         %[[SLOT:.*]] = tensor.extract_slice %{{.*}}[0, 5] [2, 4] [1, 1] : tensor<3x16xf32> to tensor<2x4xf32>
// LOWER:         linalg.generic {{.*}} outs(%[[SLOT]] : tensor<2x4xf32>)
// LOWER:           math.exp
func.func @fan_out_into_cache(%x: tensor<2x4xf32>, %y: tensor<1x4xf32>, %cache: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %e0 = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x4xf32>) outs(%e0 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  %c = tensor.concat dim(0) %a, %y : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<3x4xf32>
  %u = tensor.insert_slice %c into %cache[0, 5] [3, 4] [1, 1] : tensor<3x4xf32> into tensor<3x16xf32>
  return %u : tensor<3x16xf32>
}

// A partial cover: only half of the producer's result reaches the concat; the other half stays in
// a residual tensor of the producer's shape, which its other reader (the negation) reads.
// DECISION-LABEL: points-to @partial_cover_residual:
// DECISION:         %{{.*}} written by linalg.generic -> tensor.extract_slice, map (d0, d1) -> (d0, d1) on 0<=d1<4
// CHECK-LABEL: func.func @partial_cover_residual
// CHECK:         %[[BUF:.*]] = tensor.empty() : tensor<2x7xf32>
// CHECK:         %[[Y:.*]] = "vt.store_into"(%arg1, %[[BUF]])
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:         %[[REST:.*]] = tensor.empty() : tensor<2x8xf32>
// CHECK:         %[[S:.*]]:2 = "vt.store_into"(%[[A]], %[[Y]], %[[REST]])
// CHECK:         "vt.view"(%[[S]]#1) {{.*}} -> tensor<2x4xf32>
// CHECK:           arith.negf
// LOWER-LABEL: func.func @partial_cover_residual
// LOWER:         linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// LOWER:           math.exp
// LOWER:         linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4xf32>)
// LOWER:           math.exp
func.func @partial_cover_residual(%x: tensor<2x8xf32>, %y: tensor<2x3xf32>) -> (tensor<2x7xf32>, tensor<2x4xf32>) {
  %e0 = tensor.empty() : tensor<2x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%e0 : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %lo = tensor.extract_slice %a[0, 0] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %hi = tensor.extract_slice %a[0, 4] [2, 4] [1, 1] : tensor<2x8xf32> to tensor<2x4xf32>
  %c = tensor.concat dim(1) %lo, %y : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<2x7xf32>
  %e1 = tensor.empty() : tensor<2x4xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%hi : tensor<2x4xf32>) outs(%e1 : tensor<2x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<2x4xf32>
  return %c, %n : tensor<2x7xf32>, tensor<2x4xf32>
}

// The first producer is less than half of the buffer: writing it in would make the whole buffer
// live from there on (a U-Net skip connection), so it is copied; the later producer, computed
// after the buffer is born, still writes into it.
// DECISION-LABEL: points-to @small_early_producer_copied:
// DECISION:       concat-store tensor.concat -> %{{.*}}: 1 producer(s) write into the concat buffer, 1 input(s) copied
// DECISION:         %{{.*}} copied: it would make the buffer (20 elements) live from its producer on, and it is less than half of it
// CHECK-LABEL: func.func @small_early_producer_copied
// CHECK:         %[[A:.*]] = linalg.generic
// CHECK:           math.exp
// CHECK:         %[[BUF:.*]] = tensor.empty() : tensor<2x10xf32>
// CHECK:         %[[S1:.*]] = "vt.store_into"(%[[A]], %[[BUF]])
// CHECK:         %[[B:.*]] = linalg.generic
// CHECK:           arith.negf
// CHECK:         "vt.store_into"(%[[B]], %[[S1]])
func.func @small_early_producer_copied(%x: tensor<2x2xf32>, %y: tensor<2x8xf32>, %w: tensor<10x3xf32>) -> tensor<2x3xf32> {
  %e0 = tensor.empty() : tensor<2x2xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x2xf32>) outs(%e0 : tensor<2x2xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x2xf32>
  %e1 = tensor.empty() : tensor<2x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<2x8xf32>) outs(%e1 : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = arith.negf %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %c = tensor.concat dim(1) %a, %b : (tensor<2x2xf32>, tensor<2x8xf32>) -> tensor<2x10xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<2x3xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [#red_in, #red_w, #red_out], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%c, %w : tensor<2x10xf32>, tensor<10x3xf32>) outs(%acc : tensor<2x3xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}

// A concat of two single elements of one producer (`roll` of a split piece, as the importer gives
// it): the producer writes 2 of its 7 elements into the concat buffer and the rest into a residual
// tensor. Its other reader slices element 5, which lies in the buffer: the slice folds into a view
// of the buffer alone, without the residual operand it does not read (fuzz seed 2611 case 2763).
// CHECK-LABEL: func.func @slice_of_stored_element
// CHECK:         %[[ST:.*]]:2 = "vt.store_into"(%{{.*}}, %{{.*}}, %{{.*}}) {{.*}} (tensor<7xf32>, tensor<2xf32>, tensor<7xf32>) -> (tensor<2xf32>, tensor<7xf32>)
// CHECK:         "vt.view"(%[[ST]]#0) {{.*}} : (tensor<2xf32>) -> tensor<1xf32>
func.func @slice_of_stored_element(%x: tensor<7xi64>) -> (tensor<2xf32>, tensor<f32>) {
  %e = tensor.empty() : tensor<7xf32>
  %f = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%x : tensor<7xi64>) outs(%e : tensor<7xf32>) {
  ^bb0(%v: i64, %o: f32):
    %s = arith.sitofp %v : i64 to f32
    linalg.yield %s : f32
  } -> tensor<7xf32>
  %piece = tensor.extract_slice %f[4] [2] [1] : tensor<7xf32> to tensor<2xf32>
  %one = tensor.extract_slice %f[5] [1] [1] : tensor<7xf32> to tensor<1xf32>
  %scalar = tensor.collapse_shape %one [] : tensor<1xf32> into tensor<f32>
  %hi = tensor.extract_slice %piece[1] [1] [1] : tensor<2xf32> to tensor<1xf32>
  %lo = tensor.extract_slice %piece[0] [1] [1] : tensor<2xf32> to tensor<1xf32>
  %c = tensor.concat dim(0) %hi, %lo : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
  return %c, %scalar : tensor<2xf32>, tensor<f32>
}
