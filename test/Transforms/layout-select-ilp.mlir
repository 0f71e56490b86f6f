// RUN: vt-opt %s --layout-select-ilp='target=paper-mkl' | filecheck %s
// RUN: vt-opt %s --layout-select-ilp='target=paper-mkl report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --layout-resolve='target=paper-mkl' | filecheck %s --check-prefix=NAIVE
// RUN: vt-opt %s --layout-resolve='target=paper-mkl' | vt-opt --layout-select-ilp='target=paper-mkl' | filecheck %s
// RUN: vt-opt %s --layout-select-ilp='target=paper-mkl report=- json=true' -o /dev/null 2>&1 | filecheck %s --check-prefix=JSON
// RUN: not vt-opt %s --layout-select-ilp='cost=hops' -o /dev/null 2>&1 | filecheck %s --check-prefix=ERR

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bc = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>

// VTensor Fig. 9: conv (MKL-DNN, nChw16c) -> bias add (broadcast; TensorFlow restricts it to
// NHWC) -> ReLU (ANY) -> conv. Naive resolution converts 16c -> NHWC -> 16c around the element-wise
// ops; EWO runs them in nChw16c and only the function's entry and exit convert.
// NAIVE-LABEL: func.func @fig9
// NAIVE-COUNT-4: "layout.convert"
// NAIVE-NOT:     "layout.convert"

// CHECK-LABEL: func.func @fig9
// CHECK-SAME:    %[[X:.*]]: tensor<1x16x8x8xf32>
// CHECK:         "layout.convert"(%[[X]]) {dst_layout = {block_dims = array<i64: 1>, block_sizes = array<i64: 16>
// CHECK:         %[[C1:.*]] = linalg.conv_2d_nchw_fchw
// CHECK-NOT:     "layout.convert"
// CHECK:         %[[A:.*]] = linalg.generic {{.*}} ins(%[[C1]], %{{.*}} : tensor<1x16x8x8xf32>, tensor<16x1x1xf32>)
// CHECK-SAME:      layout.produced = [{block_dims = array<i64: 1>, block_sizes = array<i64: 16>, perm = array<i64: 0, 1, 2, 3>}]
// CHECK-NOT:     "layout.convert"
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<1x16x8x8xf32>)
// CHECK-SAME:      layout.produced = [{block_dims = array<i64: 1>, block_sizes = array<i64: 16>, perm = array<i64: 0, 1, 2, 3>}]
// CHECK-NOT:     "layout.convert"
// CHECK:         linalg.conv_2d_nchw_fchw {{.*}} ins(%[[R]],
// CHECK:         "layout.convert"
// CHECK-NOT:     "layout.convert"
// CHECK:         return

// REPORT: layout-select-ilp report (target paper-mkl)
// REPORT-NEXT: func @fig9: conversions 4 -> 2, bytes 16384 -> 8192; {{[0-9]+}} constant operand(s) re-laid at compile time; ILP {{[0-9]+}} variables ({{[0-9]+}} integer), {{[0-9]+}} constraints, Optimal, {{.*}} ms

// JSON: "naive_conversions": 4,
// JSON: "conversions": 2,
// JSON: "ilp_status": "Optimal"

// ERR: error: layout-select-ilp: cost must be 'bytes', 'count' or 'time', got 'hops'
func.func @fig9(%x: tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32> {
  %w = arith.constant dense<1.0> : tensor<16x16x1x1xf32>
  %b = arith.constant dense<0.5> : tensor<16x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x16x8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %c1 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%x, %w : tensor<1x16x8x8xf32>, tensor<16x16x1x1xf32>) outs(%init : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%c1, %b : tensor<1x16x8x8xf32>, tensor<16x1x1xf32>) outs(%e : tensor<1x16x8x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %s = arith.addf %i, %j : f32
    linalg.yield %s : f32
  } -> tensor<1x16x8x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a : tensor<1x16x8x8xf32>) outs(%e : tensor<1x16x8x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.maximumf %i, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x16x8x8xf32>
  %c2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
      ins(%r, %w : tensor<1x16x8x8xf32>, tensor<16x16x1x1xf32>) outs(%init : tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
  return %c2 : tensor<1x16x8x8xf32>
}
