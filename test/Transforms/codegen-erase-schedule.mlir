// RUN: vt-opt %s --codegen-erase-schedule | filecheck %s

// The script and the tags go; the kernels stay.
// CHECK:       module {
// CHECK-LABEL: func.func @f
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : memref<4xf32>)
// CHECK-NOT:     codegen.
// CHECK-NOT:     transform.
module attributes {transform.with_named_sequence} {
  func.func @f(%m: memref<4xf32>) {
    %z = arith.constant 0.0 : f32
    linalg.fill {codegen.kernel = 0 : i64, codegen.scheduled} ins(%z : f32) outs(%m : memref<4xf32>)
    return
  }
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    transform.yield
  }
}
