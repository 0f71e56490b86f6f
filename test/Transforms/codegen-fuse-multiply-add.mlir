// RUN: vt-opt %s --split-input-file --codegen-fuse-multiply-add | filecheck %s

// A register tile's k step: the marked product and the add of it become one fused multiply-add,
// whichever side of the add the product is on; the mark is gone.
// CHECK-LABEL: func.func @k_step
// CHECK-SAME:    (%[[A:.*]]: vector<4x16xf32>, %[[B:.*]]: vector<4x16xf32>, %[[C:.*]]: vector<4x16xf32>)
// CHECK:         %[[F:.*]] = math.fma %[[A]], %[[B]], %[[C]] : vector<4x16xf32>
// CHECK:         %[[G:.*]] = math.fma %[[A]], %[[B]], %[[F]] : vector<4x16xf32>
// CHECK:         return %[[G]]
// CHECK-NOT:     codegen.fma
func.func @k_step(%a: vector<4x16xf32>, %b: vector<4x16xf32>, %c: vector<4x16xf32>) -> vector<4x16xf32> {
  %p = arith.mulf %a, %b {codegen.fma} : vector<4x16xf32>
  %s = arith.addf %c, %p : vector<4x16xf32>
  %q = arith.mulf %a, %b {codegen.fma} : vector<4x16xf32>
  %t = arith.addf %q, %s : vector<4x16xf32>
  return %t : vector<4x16xf32>
}

// -----

// Kept apart: an unmarked product (an elementwise kernel's), and a marked one with a second use (its
// rounded value is needed); the mark is removed all the same.
// CHECK-LABEL: func.func @kept
// CHECK:         arith.mulf
// CHECK-NEXT:    arith.addf
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK-NEXT:    arith.addf %[[P]]
// CHECK-NOT:     math.fma
// CHECK-NOT:     codegen.fma
func.func @kept(%a: vector<16xf32>, %b: vector<16xf32>) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>) {
  %p = arith.mulf %a, %b : vector<16xf32>
  %s = arith.addf %p, %a : vector<16xf32>
  %q = arith.mulf %a, %b {codegen.fma} : vector<16xf32>
  %t = arith.addf %q, %b : vector<16xf32>
  return %s, %t, %q : vector<16xf32>, vector<16xf32>, vector<16xf32>
}
