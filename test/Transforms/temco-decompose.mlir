// RUN: vt-opt %s --temco-decompose='rank-ratio=0.5' | filecheck %s
// RUN: vt-opt %s --temco-decompose='report=- rank-ratio=0.5 skip-pointwise=false' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --temco-decompose='report=- rank-ratio=0.5 json=true' -o /dev/null 2>&1 | filecheck %s --check-prefix=JSON
// RUN: not vt-opt %s --temco-decompose='rank-ratio=0' 2>&1 | filecheck %s --check-prefix=BADRATIO

// Tucker-2 (TeMCO §2.1): a padded, strided 3x3 conv with a bias becomes fconv (1x1, on the unpadded
// input) -> pad -> core 3x3 (stride kept) -> lconv (1x1, accumulating into the bias broadcast).
// The all-ones weight has rank 1 in both channel modes, so rank-ratio 0.5 reconstructs it exactly.

// CHECK-LABEL: func.func @padded_strided_conv
// CHECK-SAME:    %[[X:.*]]: tensor<1x4x8x8xf32>
// CHECK:         %[[BIAS:.*]] = linalg.broadcast
// CHECK:         %[[U_IN:.*]] = arith.constant dense<{{.*}}> : tensor<2x4x1x1xf32>
// CHECK:         %[[Z1:.*]] = linalg.fill {{.*}} -> tensor<1x2x8x8xf32>
// CHECK:         %[[R1:.*]] = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>, temco.layer = 0 : i64, temco.role = "fconv"} ins(%[[X]], %[[U_IN]] : tensor<1x4x8x8xf32>, tensor<2x4x1x1xf32>) outs(%[[Z1]] : tensor<1x2x8x8xf32>)
// CHECK:         %[[P:.*]] = tensor.pad %[[R1]] low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK:         } : tensor<1x2x8x8xf32> to tensor<1x2x10x10xf32>
// CHECK:         %[[G:.*]] = arith.constant dense<{{.*}}> : tensor<4x2x3x3xf32>
// CHECK:         %[[R2:.*]] = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>, temco.layer = 0 : i64, temco.role = "core"} ins(%[[P]], %[[G]] : tensor<1x2x10x10xf32>, tensor<4x2x3x3xf32>) outs(%{{.*}} : tensor<1x4x4x4xf32>)
// CHECK:         %[[U_OUT:.*]] = arith.constant dense<{{.*}}> : tensor<8x4x1x1xf32>
// CHECK:         %[[Y:.*]] = linalg.conv_2d_nchw_fchw {{{.*}}temco.layer = 0 : i64, temco.role = "lconv"} ins(%[[R2]], %[[U_OUT]] : tensor<1x4x4x4xf32>, tensor<8x4x1x1xf32>) outs(%[[BIAS]] : tensor<1x8x4x4xf32>)
// CHECK-NOT:     tensor<8x4x3x3xf32>
// CHECK:         return %[[Y]]
func.func @padded_strided_conv(%x: tensor<1x4x8x8xf32>) -> tensor<1x8x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<1.0> : tensor<8x4x3x3xf32>
  %b = arith.constant dense<0.5> : tensor<8xf32>
  %padded = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x4x8x8xf32> to tensor<1x4x10x10xf32>
  %e = tensor.empty() : tensor<1x8x4x4xf32>
  %bias = linalg.broadcast ins(%b : tensor<8xf32>) outs(%e : tensor<1x8x4x4xf32>) dimensions = [0, 2, 3]
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
       ins(%padded, %w : tensor<1x4x10x10xf32>, tensor<8x4x3x3xf32>) outs(%bias : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  return %y : tensor<1x8x4x4xf32>
}

// A pointwise conv is left alone by default. With skip-pointwise=false, diag(3, 1) truncated to rank
// (1, 1) keeps 3: the relative error is |1| / sqrt(3^2 + 1^2) = 0.316228.

// CHECK-LABEL: func.func @pointwise
// CHECK:         linalg.conv_2d_nchw_fchw
// CHECK-NOT:     temco.role
// CHECK-SAME:    tensor<2x2x1x1xf32>
// CHECK-NOT:     linalg.conv_2d_nchw_fchw
func.func @pointwise(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %w = arith.constant dense<[[[[3.0]], [[0.0]]], [[[0.0]], [[1.0]]]]> : tensor<2x2x1x1xf32>
  %e = tensor.empty() : tensor<1x2x4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
       ins(%x, %w : tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) outs(%z : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %y : tensor<1x2x4x4xf32>
}

// A conv whose filter is not a constant cannot be decomposed at compile time.
// CHECK-LABEL: func.func @runtime_weight
// CHECK:         linalg.conv_2d_nchw_fchw
// CHECK-NOT:     temco.role
func.func @runtime_weight(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x3x3xf32>) -> tensor<1x2x2x2xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2x2x2xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
       ins(%x, %w : tensor<1x2x4x4xf32>, tensor<2x2x3x3xf32>) outs(%z : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  return %y : tensor<1x2x2x2xf32>
}

// REPORT-LABEL: temco-decompose report (rank-ratio 0.5)
// REPORT-NEXT:  func @padded_strided_conv
// REPORT-NEXT:    layer 0   conv 8x4x3x3        ranks (2, 4)  rel-error 0.000000  params 288 -> 112  {{.*}}temco-decompose.mlir:{{[0-9]+}}:8
// REPORT-NEXT:  func @pointwise
// REPORT-NEXT:    layer 0   conv 2x2x1x1        ranks (1, 1)  rel-error 0.316228  params 4 -> 5
// REPORT-NEXT:  func @runtime_weight
// REPORT-NEXT:    conv 2x2x3x3        skipped: weight is not a constant
// REPORT-NEXT:  total: 2 conv(s) decomposed, 1 skipped; decomposed weights 292 -> 117 parameters

// JSON:      "rank_ratio": 0.5,
// JSON:      "function": "padded_strided_conv",
// JSON:      "ranks": [
// JSON-NEXT:   2,
// JSON-NEXT:   4
// JSON:      "skipped": "pointwise (1x1) conv"

// BADRATIO: error: temco-decompose: rank-ratio must be in (0, 1], got 0
