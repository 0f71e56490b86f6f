// RUN: vt-opt %s --split-input-file --codegen-emulate-bf16 | filecheck %s

// Each bf16 op runs in f32 and is rounded back after it: the multiply's result is truncated to
// bf16 and extended again before the add (one rounding per op, as torch's eager kernels).
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    (%[[A:.*]]: vector<8xbf16>, %[[B:.*]]: vector<8xbf16>)
// CHECK:         %[[A32:.*]] = arith.extf %[[A]] : vector<8xbf16> to vector<8xf32>
// CHECK:         %[[B32:.*]] = arith.extf %[[B]] : vector<8xbf16> to vector<8xf32>
// CHECK:         %[[M32:.*]] = arith.mulf %[[A32]], %[[B32]] : vector<8xf32>
// CHECK:         %[[M:.*]] = arith.truncf %[[M32]] : vector<8xf32> to vector<8xbf16>
// CHECK:         %[[M_:.*]] = arith.extf %[[M]] : vector<8xbf16> to vector<8xf32>
// CHECK:         %[[S32:.*]] = arith.addf %[[M_]], %{{.*}} : vector<8xf32>
// CHECK:         %[[S:.*]] = arith.truncf %[[S32]] : vector<8xf32> to vector<8xbf16>
// CHECK:         return %[[S]]
func.func @chain(%a: vector<8xbf16>, %b: vector<8xbf16>) -> vector<8xbf16> {
  %m = arith.mulf %a, %b : vector<8xbf16>
  %s = arith.addf %m, %a : vector<8xbf16>
  return %s : vector<8xbf16>
}

// -----

// A comparison extends its operands (exact) and keeps its i1 result; math ops are promoted too;
// f32 ops and the conversions themselves are left alone.
// CHECK-LABEL: func.func @mixed
// CHECK:         arith.cmpf olt, %{{.*}}, %{{.*}} : f32
// CHECK:         %[[E:.*]] = math.exp %{{.*}} : f32
// CHECK:         arith.truncf %[[E]] : f32 to bf16
// CHECK:         arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NOT:     bf16 to f32
// CHECK:         return
func.func @mixed(%x: bf16, %y: bf16, %f: f32) -> (i1, bf16, f32) {
  %c = arith.cmpf olt, %x, %y : bf16
  %e = math.exp %x : bf16
  %g = arith.addf %f, %f : f32
  return %c, %e, %g : i1, bf16, f32
}
