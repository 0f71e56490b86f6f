// RUN: vt-opt %s --split-input-file --codegen-plan-workspace | filecheck %s
// RUN: vt-opt %s --split-input-file --pass-pipeline="builtin.module(codegen-plan-workspace{function=second})" | filecheck %s --check-prefix=NAMED

// Greedy by size: %big (4000 bytes) first at 0; %late (48 bytes, 128-aligned) lives after %big is
// freed and shares its offset; %small (40 bytes) overlaps both and goes above %big, at the next
// multiple of 64. The workspace is the last argument, 4096 bytes, assumed aligned as its most
// aligned buffer; every dealloc is gone.
// CHECK-LABEL: func.func @overlap_and_disjoint
// CHECK-SAME:    %{{.*}}: memref<16xf32>, %[[WS:[^:]*]]: memref<4096xi8>)
// CHECK:         %[[A:.*]] = memref.assume_alignment %[[WS]], 128 : memref<4096xi8>
// CHECK:         %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[BIG:.*]] = memref.view %[[A]][%[[C0]]][] : memref<4096xi8> to memref<1000xf32>
// CHECK-NEXT:    memref.store %{{.*}}, %[[BIG]]
// CHECK-NEXT:    %[[C4032:.*]] = arith.constant 4032 : index
// CHECK-NEXT:    %[[SMALL:.*]] = memref.view %[[A]][%[[C4032]]][] : memref<4096xi8> to memref<10xf32>
// CHECK-NEXT:    memref.store %{{.*}}, %[[SMALL]]
// CHECK-NEXT:    %[[C0B:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[LATE:.*]] = memref.view %[[A]][%[[C0B]]][] : memref<4096xi8> to memref<2x3xf64>
// CHECK-NEXT:    memref.load %[[SMALL]]
// CHECK-NOT:     memref.dealloc
// CHECK-NOT:     memref.alloc
// CHECK:         return
func.func @overlap_and_disjoint(%x: memref<16xf32>) {
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  %big = memref.alloc() {alignment = 64 : i64} : memref<1000xf32>
  memref.store %f, %big[%c1] : memref<1000xf32>
  %small = memref.alloc() : memref<10xf32>
  memref.store %f, %small[%c1] : memref<10xf32>
  memref.dealloc %big : memref<1000xf32>
  %late = memref.alloc() {alignment = 128 : i64} : memref<2x3xf64>
  %v = memref.load %small[%c1] : memref<10xf32>
  memref.dealloc %small : memref<10xf32>
  memref.dealloc %late : memref<2x3xf64>
  return
}

// -----

// Buffers used only inside a loop between their alloc and dealloc are live for the whole loop: the
// two overlap and get disjoint, 64-byte aligned offsets (100 bytes -> the next at 128).
// CHECK-LABEL: func.func @used_in_a_loop
// CHECK-SAME:    %[[WS:[^:]*]]: memref<192xi8>)
// CHECK:         %[[A:.*]] = memref.assume_alignment %[[WS]], 64
// CHECK:         %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    memref.view %[[A]][%[[C0]]][] : memref<192xi8> to memref<25xf32>
// CHECK-NEXT:    %[[C128:.*]] = arith.constant 128 : index
// CHECK-NEXT:    memref.view %[[A]][%[[C128]]][] : memref<192xi8> to memref<16xf32>
// CHECK-NEXT:    scf.for
// CHECK-NOT:     memref.dealloc
func.func @used_in_a_loop(%n: index) {
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<25xf32>
  %b = memref.alloc() : memref<16xf32>
  scf.for %i = %c2 to %n step %c1 {
    %s = memref.subview %a[0] [16] [1] : memref<25xf32> to memref<16xf32, strided<[1]>>
    %v = memref.load %s[%i] : memref<16xf32, strided<[1]>>
    memref.store %v, %b[%i] : memref<16xf32>
  }
  memref.dealloc %a : memref<25xf32>
  memref.dealloc %b : memref<16xf32>
  return
}

// -----

// Left to malloc: an allocation in a loop, a dynamic one, a strided one, a bool buffer (a byte per
// element in LLVM, a bit in the type), one never freed, one freed inside a region, one returned
// (through a view) and one passed to a call. Nothing is planned: the signature stays as it was.
// CHECK-LABEL: func.func @left_alone
// CHECK-SAME:    (%{{[^:]*}}: index, %{{[^:]*}}: i1) -> memref<4xf32>
// CHECK-NOT:     memref.view
// CHECK-NOT:     memref.assume_alignment
// CHECK-COUNT-8: memref.alloc
// CHECK:         return
func.func private @keep(memref<8xf32>)
func.func @left_alone(%n: index, %p: i1) -> memref<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = arith.constant 1.0 : f32
  scf.for %i = %c0 to %n step %c1 {
    %inner = memref.alloc() : memref<8xf32>
    memref.store %f, %inner[%c0] : memref<8xf32>
    memref.dealloc %inner : memref<8xf32>
  }
  %dynamic = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %dynamic : memref<?xf32>
  %strided = memref.alloc() : memref<4xf32, strided<[2]>>
  memref.dealloc %strided : memref<4xf32, strided<[2]>>
  %bools = memref.alloc() : memref<8xi1>
  memref.dealloc %bools : memref<8xi1>
  %leaked = memref.alloc() : memref<8xf32>
  %branch = memref.alloc() : memref<8xf32>
  scf.if %p {
    memref.dealloc %branch : memref<8xf32>
  }
  %returned = memref.alloc() : memref<8xf32>
  %half = memref.subview %returned[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  %cast = memref.cast %half : memref<4xf32, strided<[1]>> to memref<4xf32>
  %called = memref.alloc() : memref<8xf32>
  func.call @keep(%called) : (memref<8xf32>) -> ()
  memref.dealloc %called : memref<8xf32>
  return %cast : memref<4xf32>
}

// -----

// A function that another calls keeps its signature (its callers would need the workspace); the
// caller is planned. With `function=second` only @second is.
// CHECK-LABEL: func.func @first
// CHECK-SAME:    (%{{[^:]*}}: memref<8xf32>)
// CHECK:         memref.alloc
// CHECK-LABEL: func.func @second
// CHECK-SAME:    %{{.*}}: memref<64xi8>)
// CHECK:         memref.view
// CHECK:         call @first
// CHECK-LABEL: func.func @third
// CHECK-SAME:    %{{.*}}: memref<64xi8>)
// NAMED-LABEL: func.func @first
// NAMED-SAME:    (%{{[^:]*}}: memref<8xf32>)
// NAMED-LABEL: func.func @second
// NAMED-SAME:    %{{.*}}: memref<64xi8>)
// NAMED-LABEL: func.func @third
// NAMED-SAME:    (%{{[^:]*}}: memref<8xf32>)
// NAMED:         memref.alloc
func.func @first(%x: memref<8xf32>) {
  %t = memref.alloc() : memref<8xf32>
  memref.copy %x, %t : memref<8xf32> to memref<8xf32>
  memref.dealloc %t : memref<8xf32>
  return
}
func.func @second(%x: memref<8xf32>) {
  %t = memref.alloc() : memref<8xf32>
  memref.copy %x, %t : memref<8xf32> to memref<8xf32>
  func.call @first(%x) : (memref<8xf32>) -> ()
  memref.dealloc %t : memref<8xf32>
  return
}
func.func @third(%x: memref<8xf32>) {
  %t = memref.alloc() : memref<8xf32>
  memref.copy %x, %t : memref<8xf32> to memref<8xf32>
  memref.dealloc %t : memref<8xf32>
  return
}
