// RUN: vt-opt %s --codegen-hoist-static-allocas | filecheck %s
// RUN: vt-opt %s --pass-pipeline="builtin.module(codegen-hoist-static-allocas{sequential=true})" | filecheck %s --check-prefix=SEQ

// A packed panel's stack buffer leaves the loops: to the top of the enclosing forall body, wrapped in
// an alloca scope (released per tile), or to the top of its kernel, wrapped in a scope of its own
// (the stack holds one kernel's buffers at a time).
// CHECK-LABEL: func.func @in_forall
// CHECK:         scf.forall
// CHECK-NEXT:      memref.alloca_scope  {
// CHECK-NEXT:        memref.alloca() {alignment = 64 : i64} : memref<64xf32>
// CHECK-NEXT:        scf.for
// CHECK:           }
// CHECK-NEXT:    }
func.func @in_forall(%n: index, %x: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.forall (%i) in (2) {
    scf.for %j = %c0 to %n step %c1 {
      %a = memref.alloca() {alignment = 64 : i64} : memref<64xf32>
      memref.store %x, %a[%j] : memref<64xf32>
    }
  }
  return
}

// CHECK-LABEL: func.func @in_function
// CHECK:         memref.alloca_scope  {
// CHECK-NEXT:      memref.alloca() : memref<4xf32>
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        memref.store
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    memref.alloca_scope  {
// CHECK-NEXT:      memref.alloca() : memref<8xf32>
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        memref.store
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    return
func.func @in_function(%n: index, %x: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %j = %c0 to %n step %c1 {
    %a = memref.alloca() : memref<4xf32>
    memref.store %x, %a[%c0] : memref<4xf32>
  }
  scf.for %j = %c0 to %n step %c1 {
    %b = memref.alloca() : memref<8xf32>
    memref.store %x, %b[%c0] : memref<8xf32>
  }
  return
}

// With one thread the foralls become loops: the buffers go to the kernel's scope.
// SEQ-LABEL: func.func @in_forall
// SEQ:         memref.alloca_scope  {
// SEQ-NEXT:      memref.alloca() {alignment = 64 : i64} : memref<64xf32>
// SEQ-NEXT:      scf.forall
// SEQ-NEXT:        scf.for
// SEQ-LABEL: func.func @in_function
