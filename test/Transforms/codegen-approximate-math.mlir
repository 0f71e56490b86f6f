// RUN: vt-opt %s --codegen-approximate-math | filecheck %s

// f32 exp, erf, tanh, sin and cos, scalar or vector, become arithmetic (fused multiply-adds, selects,
// exponent bits); f64 keeps its libm call.
// CHECK-LABEL: func.func @exp
// CHECK-NOT:     math.exp
// CHECK:         math.floor %{{.*}} : vector<8xf32>
// CHECK:         math.fma %{{.*}} : vector<8xf32>
// CHECK:         arith.shli %{{.*}} : vector<8xi32>
// CHECK:         arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK:         arith.cmpf uno
// CHECK-NOT:     math.exp
// CHECK:         return
func.func @exp(%x: vector<8xf32>) -> vector<8xf32> {
  %y = math.exp %x : vector<8xf32>
  return %y : vector<8xf32>
}

// CHECK-LABEL: func.func @erf_tanh
// CHECK-NOT:     math.erf
// CHECK-NOT:     math.tanh
// CHECK:         arith.andi
// CHECK:         arith.ori
// CHECK:         math.floor
// CHECK:         arith.divf
// CHECK:         arith.ori
// CHECK-NOT:     math.tanh
// CHECK:         return
func.func @erf_tanh(%x: f32) -> (f32, f32) {
  %e = math.erf %x : f32
  %t = math.tanh %x : f32
  return %e, %t : f32, f32
}

// sin and cos: the reduction in f64, the polynomials in f32; a vector with a lane of magnitude
// 2^30 or more keeps the libm op (the then-branch).
// CHECK-LABEL: func.func @sin_cos
// CHECK:         vector.reduction <or>
// CHECK:         scf.if
// CHECK-NEXT:      math.sin %{{.*}} : vector<8xf32>
// CHECK:         } else {
// CHECK:           arith.extf %{{.*}} : vector<8xf32> to vector<8xf64>
// CHECK:           math.floor %{{.*}} : vector<8xf64>
// CHECK:           arith.truncf %{{.*}} : vector<8xf64> to vector<8xf32>
// CHECK:           math.fma %{{.*}} : vector<8xf32>
// CHECK:           arith.xori
// CHECK-NOT:       math.sin
// CHECK:         scf.if
// CHECK-NEXT:      math.cos %{{.*}} : f32
// CHECK:         } else {
// CHECK:           arith.extf %{{.*}} : f32 to f64
// CHECK-NOT:       math.cos
// CHECK:         return
func.func @sin_cos(%x: vector<8xf32>, %y: f32) -> (vector<8xf32>, f32) {
  %s = math.sin %x : vector<8xf32>
  %c = math.cos %y : f32
  return %s, %c : vector<8xf32>, f32
}

// CHECK-LABEL: func.func @double
// CHECK:         math.exp %{{.*}} : f64
func.func @double(%x: f64) -> f64 {
  %y = math.exp %x : f64
  return %y : f64
}
