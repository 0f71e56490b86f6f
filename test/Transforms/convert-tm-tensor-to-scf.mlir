// RUN: vt-opt %s --split-input-file --convert-tm-tensor-to-scf | filecheck %s
// RUN: vt-opt %s --split-input-file --convert-tm-tensor-to-scf | filecheck %s --check-prefix=GONE

// No TMTensor op survives the pass.
// GONE-NOT: tm_tensor.

// cumsum along dim 1 (as torch-mlir imports it): one forall iteration per row, a sequential scan of
// the row inside, the combiner cloned in; the row and the accumulator are inserted back in parallel.
// CHECK-LABEL: func.func @cumsum
// CHECK-SAME:    %[[X:[^:]*]]: tensor<3x5xf32>
// CHECK:         scf.forall (%[[R:.*]]) in (3) shared_outs(%[[OUT:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}})
// CHECK:           %[[XROW:.*]] = tensor.extract_slice %[[X]][%[[R]], 0] [1, 5] [1, 1] : tensor<3x5xf32> to tensor<5xf32>
// CHECK:           %[[ROW:.*]] = tensor.extract_slice %[[OUT]][%[[R]], 0] [1, 5] [1, 1] : tensor<3x5xf32> to tensor<5xf32>
// CHECK:           scf.for %{{.*}} iter_args(%{{.*}} = %[[ROW]], %{{.*}} = %{{.*}}) -> (tensor<5xf32>, f32)
// CHECK:             scf.if
// CHECK:             } else {
// CHECK:               arith.addf
// CHECK:             tensor.insert
// CHECK:           scf.forall.in_parallel
// CHECK-NEXT:        tensor.parallel_insert_slice %{{.*}} into %[[OUT]][%[[R]], 0] [1, 5] [1, 1]
// CHECK-NEXT:        tensor.parallel_insert_slice %{{.*}} into %[[ACC]][%[[R]]] [1] [1] : tensor<f32> into tensor<3xf32>
func.func @cumsum(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<3x5xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<3x5xf32>) -> tensor<3x5xf32>
  %2 = tensor.empty() : tensor<3xf32>
  %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<3xf32>) -> tensor<3xf32>
  %4:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%x : tensor<3x5xf32>) outs(%1, %3 : tensor<3x5xf32>, tensor<3xf32>) {
  ^bb0(%a: f32, %b: f32):
    %5 = arith.addf %a, %b : f32
    tm_tensor.yield %5 : f32
  } -> tensor<3x5xf32>, tensor<3xf32>
  return %4#0 : tensor<3x5xf32>
}

// -----

// Sort of values and indices along dim 0 of a 9x2 tensor: per column, ceil(log2 9) = 4 merge
// passes, run as 2 pairs over two row buffers (spare rows from alloc_tensor, which cse keeps apart).
// The comparator decides between the heads of the two runs.
// CHECK-LABEL: func.func @sort
// CHECK:         scf.forall (%[[C:.*]]) in (2) shared_outs(%[[V:.*]] = %{{.*}}, %[[I:.*]] = %{{.*}})
// CHECK-DAG:       tensor.extract_slice %[[V]][0, %[[C]]] [9, 1] [1, 1] : tensor<9x2xf32> to tensor<9xf32>
// CHECK-DAG:       tensor.extract_slice %[[I]][0, %[[C]]] [9, 1] [1, 1] : tensor<9x2xi64> to tensor<9xi64>
// CHECK-DAG:       bufferization.alloc_tensor() : tensor<9xf32>
// CHECK-DAG:       bufferization.alloc_tensor() : tensor<9xi64>
// CHECK-DAG:       %[[PAIRS:.*]] = arith.constant 2 : index
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[PAIRS]] step
// CHECK:             scf.for
// CHECK:               scf.for
// CHECK:                 arith.cmpf ole
// CHECK:                 arith.select
// CHECK:                 tensor.insert
// CHECK:           scf.forall.in_parallel
// CHECK-NEXT:        tensor.parallel_insert_slice %{{.*}} into %[[V]][0, %[[C]]] [9, 1] [1, 1]
// CHECK-NEXT:        tensor.parallel_insert_slice %{{.*}} into %[[I]][0, %[[C]]] [9, 1] [1, 1]
func.func @sort(%x: tensor<9x2xf32>, %i: tensor<9x2xi64>) -> (tensor<9x2xf32>, tensor<9x2xi64>) {
  %0:2 = tm_tensor.sort dimension(0) outs(%x, %i : tensor<9x2xf32>, tensor<9x2xi64>) {
  ^bb0(%a: f32, %b: f32, %c: i64, %d: i64):
    %1 = arith.cmpf ole, %a, %b : f32
    tm_tensor.yield %1 : i1
  } -> tensor<9x2xf32>, tensor<9x2xi64>
  return %0#0, %0#1 : tensor<9x2xf32>, tensor<9x2xi64>
}

// -----

// index_put with accumulate (rows of a 6x3 tensor): the update dimension of size 3 addresses result
// dimension 1, which no index addresses: it is the forall's parallel dimension; the updates are
// applied in order inside, a negative index wraps, an update out of range is skipped.
// CHECK-LABEL: func.func @index_put
// CHECK:         scf.forall (%[[J:.*]]) in (3) shared_outs(%[[O:.*]] = %{{.*}})
// CHECK:           %[[COL:.*]] = tensor.extract_slice %[[O]][0, %[[J]]] [6, 1] [1, 1] : tensor<6x3xf32> to tensor<6xf32>
// CHECK:           scf.for %{{.*}} iter_args(%{{.*}} = %[[COL]]) -> (tensor<6xf32>)
// CHECK:             scf.for
// CHECK:               tensor.extract %{{.*}} : tensor<3x1xi64>
// CHECK:               arith.cmpi slt
// CHECK:               arith.select
// CHECK:               scf.if
// CHECK:                 arith.addf
// CHECK:                 tensor.insert
// CHECK:           scf.forall.in_parallel
// CHECK-NEXT:        tensor.parallel_insert_slice %{{.*}} into %[[O]][0, %[[J]]] [6, 1] [1, 1]
func.func @index_put(%x: tensor<6x3xf32>, %i: tensor<3x1xi64>, %u: tensor<3x1x3xf32>) -> tensor<6x3xf32> {
  %0 = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(false) ins(%u, %i : tensor<3x1x3xf32>, tensor<3x1xi64>) outs(%x : tensor<6x3xf32>) {
  ^bb0(%new: f32, %old: f32):
    %1 = arith.addf %old, %new : f32
    tm_tensor.yield %1 : f32
  } -> tensor<6x3xf32>
  return %0 : tensor<6x3xf32>
}

// -----

// topk (kthvalue's form): each element of a row walks the k-list; the comparator runs both ways.
// CHECK-LABEL: func.func @topk
// CHECK:         scf.forall (%{{.*}}) in (3) shared_outs
// CHECK:           scf.for
// CHECK:             scf.for
// CHECK:               arith.cmpf olt
// CHECK:               arith.cmpf olt
// CHECK:               arith.cmpi slt
func.func @topk(%x: tensor<3x6xf32>, %v: tensor<3x2xf32>, %i: tensor<3x2xi64>) -> (tensor<3x2xf32>, tensor<3x2xi64>) {
  %0:2 = tm_tensor.topk dimension(1) ins(%x : tensor<3x6xf32>) outs(%v, %i : tensor<3x2xf32>, tensor<3x2xi64>) {
  ^bb0(%a: f32, %b: f32):
    %1 = arith.cmpf olt, %a, %b : f32
    tm_tensor.yield %1 : i1
  } -> tensor<3x2xf32>, tensor<3x2xi64>
  return %0#0, %0#1 : tensor<3x2xf32>, tensor<3x2xi64>
}

// -----

// Attention: structured ops only (no loops), the scale folded into the scores, an i1 mask selected
// into 0 / -inf, f16 computed in f32 and truncated at the end.
// CHECK-LABEL: func.func @attention
// CHECK-NOT:     scf.
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:     %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG:     %[[SCALE:.*]] = arith.constant 1.250000e-01 : f32
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x3x4xf16>, tensor<2x5x4xf16>) outs(%{{.*}} : tensor<2x3x5xf32>)
// CHECK:           arith.extf
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x3x5xf32>, tensor<2x3x5xi1>)
// CHECK:           arith.mulf %{{.*}}, %[[SCALE]]
// CHECK:           arith.select %{{.*}}, %[[ZERO]], %[[NEGINF]]
// CHECK:         arith.maximumf
// CHECK:         math.exp
// CHECK:         arith.divf
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x3x5xf32>, tensor<2x5x6xf16>)
// CHECK:         arith.truncf
// CHECK:         return %{{.*}} : tensor<2x3x6xf16>
func.func @attention(%q: tensor<2x3x4xf16>, %k: tensor<2x5x4xf16>, %v: tensor<2x5x6xf16>, %m: tensor<2x3x5xi1>) -> tensor<2x3x6xf16> {
  %cst = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<2x3x6xf16>
  %o = linalg.fill ins(%cst : f16) outs(%e : tensor<2x3x6xf16>) -> tensor<2x3x6xf16>
  %a = tm_tensor.attention {scale = 0.125 : f64} ins(%q, %k, %v, %m : tensor<2x3x4xf16>, tensor<2x5x4xf16>, tensor<2x5x6xf16>, tensor<2x3x5xi1>) outs(%o : tensor<2x3x6xf16>) -> tensor<2x3x6xf16>
  return %a : tensor<2x3x6xf16>
}
