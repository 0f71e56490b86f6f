// RUN: vt-opt %s --temco-fold-weight-ops | filecheck %s
// RUN: vt-opt %s --temco-fold-weight-ops='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT

// Eval-mode BatchNorm as the importer writes it: 1/sqrt(var + eps) computed at run time from the
// weight vector, with a zero-size assert. The three generics fold into one constant (what float32
// arithmetic gives: 1/sqrt(3 + 1) = 0.5, 1/sqrt(0 + 1) = 1).

#id = affine_map<(d0) -> (d0)>

// CHECK-LABEL: func.func @bn_invstd
// CHECK-NOT:     linalg.generic
// CHECK:         %[[C:.*]] = arith.constant dense<[5.000000e-01, 1.000000e+00]> : tensor<2xf32>
// CHECK:         return %[[C]]
// REPORT-COUNT-3: temco-fold-weight-ops: {{.*}}: tensor<2xf32> folded
// REPORT-NOT: temco-fold-weight-ops
func.func @bn_invstd() -> tensor<2xf32> {
  %var = arith.constant dense<[3.0, 0.0]> : tensor<2xf32>
  %eps = arith.constant 1.000000e+00 : f64
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %e = tensor.empty() : tensor<2xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%var : tensor<2xf32>) outs(%e : tensor<2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %eps : f64 to f32
    %s = arith.addf %in, %t : f32
    linalg.yield %s : f32
  } -> tensor<2xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%a : tensor<2xf32>) outs(%e : tensor<2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %q = math.sqrt %in : f32
    linalg.yield %q : f32
  } -> tensor<2xf32>
  %i = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%r : tensor<2xf32>) outs(%e : tensor<2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %nz = arith.cmpf one, %in, %zero : f32
    cf.assert %nz, "unimplemented: tensor with zero element"
    %d = arith.divf %one, %in : f32
    linalg.yield %d : f32
  } -> tensor<2xf32>
  return %i : tensor<2xf32>
}

// Left alone: an assert that fails for one element (var + eps = 0 would trap at run time), and an
// input that is not a constant.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-2: linalg.generic
func.func @left_alone(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %var = arith.constant dense<[3.0, 0.0]> : tensor<2xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %e = tensor.empty() : tensor<2xf32>
  %i = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%var : tensor<2xf32>) outs(%e : tensor<2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %nz = arith.cmpf one, %in, %zero : f32
    cf.assert %nz, "unimplemented: tensor with zero element"
    %d = arith.divf %one, %in : f32
    linalg.yield %d : f32
  } -> tensor<2xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%x : tensor<2xf32>) outs(%e : tensor<2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %q = math.sqrt %in : f32
    linalg.yield %q : f32
  } -> tensor<2xf32>
  return %i, %y : tensor<2xf32>, tensor<2xf32>
}
