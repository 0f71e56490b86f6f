// RUN: vt-opt %s --codegen-insert-profile-marks | filecheck %s

// Each tagged kernel is bracketed by begin/end marks with its id (also inside a loop); the public
// function's body by the marks of slot 3 (one past the last id); the private one's is not.
// CHECK-LABEL: func.func @f
// (The printer names an index constant %c<value>[_<n>]: the marks' ids are read from those names.)
// CHECK-NEXT:    %c3 = arith.constant 3 : index
// CHECK-NEXT:    call @__vtmlir_profile_begin(%c3)
// CHECK:         call @__vtmlir_profile_begin(%c0_{{[0-9]+}})
// CHECK-NEXT:    linalg.fill {codegen.kernel = 0 : i64}
// CHECK-NEXT:    arith.constant 0 : index
// CHECK-NEXT:    call @__vtmlir_profile_end(%c0_{{[0-9]+}})
// CHECK-NEXT:    scf.for
// CHECK-NEXT:      arith.constant 2 : index
// CHECK-NEXT:      call @__vtmlir_profile_begin(%c2{{(_[0-9]+)?}})
// CHECK-NEXT:      linalg.copy {codegen.kernel = 2 : i64}
// CHECK-NEXT:      arith.constant 2 : index
// CHECK-NEXT:      call @__vtmlir_profile_end(%c2_{{[0-9]+}})
// CHECK-NEXT:    }
// CHECK-NEXT:    arith.constant 3 : index
// CHECK-NEXT:    call @__vtmlir_profile_end(%c3_{{[0-9]+}})
// CHECK-NEXT:    return
// CHECK-LABEL: func.func private @g
// CHECK-NEXT:    arith.constant
// CHECK-NEXT:    arith.constant 1 : index
// CHECK-NEXT:    call @__vtmlir_profile_begin(%c1{{(_[0-9]+)?}})
// CHECK-NEXT:    linalg.fill {codegen.kernel = 1 : i64}
// CHECK-NEXT:    arith.constant 1 : index
// CHECK-NEXT:    call @__vtmlir_profile_end(%c1_{{[0-9]+}})
// CHECK-NEXT:    return
// The slots (kernels 0-2, the function), the clock and the marks.
// CHECK:       memref.global "private" @__vtmlir_profile : memref<4x4xi64> = dense<0> {alignment = 64 : i64}
// CHECK:       llvm.func @clock_gettime(i32, !llvm.ptr) -> i32
// CHECK:       func.func private @__vtmlir_profile_now() -> i64
// CHECK:         llvm.call @clock_gettime
// CHECK:       func.func private @__vtmlir_profile_begin(%{{.*}}: index)
// CHECK:         memref.store
// CHECK:       func.func private @__vtmlir_profile_end(%{{.*}}: index)
// CHECK:         arith.subi
// CHECK:       func.func @__vtmlir_profile_buffer() -> i64
// CHECK:       func.func @__vtmlir_profile_calibrate(%{{.*}}: i64)
// CHECK:         scf.for
// CHECK-NEXT:      %[[C:.*]] = arith.constant 3 : index
// CHECK-NEXT:      func.call @__vtmlir_profile_begin(%[[C]])
// CHECK:           func.call @__vtmlir_profile_end
module {
  func.func @f(%a: memref<4xf32>, %b: memref<4xf32>, %n: index) {
    %z = arith.constant 0.0 : f32
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    linalg.fill {codegen.kernel = 0 : i64} ins(%z : f32) outs(%a : memref<4xf32>)
    scf.for %i = %c0 to %n step %c1 {
      linalg.copy {codegen.kernel = 2 : i64} ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
    }
    return
  }
  func.func private @g(%a: memref<4xf32>) {
    %z = arith.constant 1.0 : f32
    linalg.fill {codegen.kernel = 1 : i64} ins(%z : f32) outs(%a : memref<4xf32>)
    return
  }
}
