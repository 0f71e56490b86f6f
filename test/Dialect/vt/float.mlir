// RUN: vt-opt %s | vt-opt | filecheck %s

// !vt.float<exponent, mantissa, "specials">: Tilus floats MLIR has no builtin for (docs/lowbit.md).
// The short form (untyped integers) parses; the printer writes the i64 parameters.

// CHECK-LABEL: func.func @floats
// CHECK-SAME:    tensor<4x!vt.float<3 : i64, 3 : i64, "finite">>
// CHECK-SAME:    tensor<4x!vt.float<2 : i64, 2 : i64, "finite">>
// CHECK-SAME:    tensor<4x!vt.float<1 : i64, 1 : i64, "finite">>
// CHECK-SAME:    -> tensor<4x!vt.float<1 : i64, 1 : i64, "finite">>
// CHECK:         return %{{.*}} : tensor<4x!vt.float<1 : i64, 1 : i64, "finite">>
func.func @floats(%e3m3: tensor<4x!vt.float<3, 3, "finite">>,
                  %e2m2: tensor<4x!vt.float<2 : i64, 2 : i64, "finite">>,
                  %e1m1: tensor<4x!vt.float<1, 1, "finite">>) -> tensor<4x!vt.float<1, 1, "finite">> {
  return %e1m1 : tensor<4x!vt.float<1, 1, "finite">>
}
