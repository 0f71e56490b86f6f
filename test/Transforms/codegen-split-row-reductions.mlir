// RUN: vt-opt %s --codegen-split-row-reductions="vector-bits=512" | filecheck %s
// RUN: vt-opt %s --codegen-split-row-reductions="vector-bits=256" | filecheck %s --check-prefix=AVX2
// RUN: vt-opt %s --codegen-split-row-reductions="vector-bits=512 schedules=row-reduction:none" | filecheck %s --check-prefix=EXACT

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>

// A row's sum of squares and its max inside a loop over row blocks (codegen-fuse-rows): each sums
// into 4 registers of partial sums per row (64 f32 lanes with 512-bit vectors), the row of 4096
// viewed as 64 x 64, in order along the 64 chunks; then one row reduction of the 64 lanes into the
// output. The partial buffer starts at the combiner's identity (-0.0 for a sum, -inf for a max).
// CHECK-LABEL: func.func @rows
// CHECK:         scf.forall
// CHECK:           %[[P:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1x64xf32>
// CHECK:           %[[ID:.*]] = arith.constant -0.000000e+00 : f32
// CHECK:           linalg.generic {{.*}} outs(%[[P]] : memref<1x64xf32>)
// CHECK-NEXT:      ^bb0(
// CHECK-NEXT:        linalg.yield %[[ID]] : f32
// CHECK:           %[[V:.*]] = memref.expand_shape %{{.*}} {{\[}}[0], [1, 2]] output_shape [1, 64, 64] : memref<1x4096xf32, strided<[4096, 1], offset: ?>> into memref<1x64x64xf32, strided<[4096, 64, 1], offset: ?>>
// CHECK:           linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[V]] : {{.*}}) outs(%[[P]] : memref<1x64xf32>) attrs =  {test.mark}
// CHECK-NEXT:      ^bb0(%[[X:.*]]: f32, %[[A:.*]]: f32):
// CHECK-NEXT:        %[[Q:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK-NEXT:        %[[S:.*]] = arith.addf %[[Q]], %[[A]] : f32
// CHECK-NEXT:        linalg.yield %[[S]] : f32
// CHECK:           linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[P]] : memref<1x64xf32>) outs(%{{.*}} : memref<1x1xf32, strided<[1, 1], offset: ?>>)
// CHECK-NEXT:      ^bb0(%[[L:.*]]: f32, %[[O:.*]]: f32):
// CHECK-NEXT:        %[[T:.*]] = arith.addf %[[L]], %[[O]] : f32
// CHECK-NEXT:        linalg.yield %[[T]] : f32
// CHECK:           arith.constant 0xFF800000 : f32
// CHECK:           arith.maximumf
// CHECK:         } {codegen.row_loop}
// With 256-bit vectors, 4 registers are 32 lanes:
// AVX2-LABEL: func.func @rows
// AVX2:         memref.alloca() {alignment = 64 : i64} : memref<1x32xf32>
// AVX2:         output_shape [1, 128, 32]
// Not under EXACT_SCHEDULES (the row-reduction schedule off: nothing reassociates):
// EXACT-LABEL: func.func @rows
// EXACT-NOT:     memref.alloca
// EXACT:         return
func.func @rows(%x: memref<8x4096xf32>, %s: memref<8x1xf32>, %m: memref<8x1xf32>) {
  scf.forall (%i) in (8) {
    %xs = memref.subview %x[%i, 0] [1, 4096] [1, 1] : memref<8x4096xf32> to memref<1x4096xf32, strided<[4096, 1], offset: ?>>
    %ss = memref.subview %s[%i, 0] [1, 1] [1, 1] : memref<8x1xf32> to memref<1x1xf32, strided<[1, 1], offset: ?>>
    %ms = memref.subview %m[%i, 0] [1, 1] [1, 1] : memref<8x1xf32> to memref<1x1xf32, strided<[1, 1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
        ins(%xs : memref<1x4096xf32, strided<[4096, 1], offset: ?>>) outs(%ss : memref<1x1xf32, strided<[1, 1], offset: ?>>) attrs = {test.mark} {
    ^bb0(%a: f32, %o: f32):
      %q = arith.mulf %a, %a : f32
      %r = arith.addf %q, %o : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
        ins(%xs : memref<1x4096xf32, strided<[4096, 1], offset: ?>>) outs(%ms : memref<1x1xf32, strided<[1, 1], offset: ?>>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.maximumf %a, %o : f32
      linalg.yield %r : f32
    }
  } {codegen.row_loop}
  return
}

// Left alone: a reduction outside a loop over row blocks, a row that is no multiple of the partial
// vector (1000 of 64 lanes), an accumulator read twice in the body.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     memref.alloca
// CHECK:         return
func.func @left_alone(%x: memref<8x4096xf32>, %y: memref<8x1000xf32>, %s: memref<8x1xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x4096xf32>) outs(%s : memref<8x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.addf %a, %o : f32
    linalg.yield %r : f32
  }
  scf.forall (%i) in (8) {
    %ys = memref.subview %y[%i, 0] [1, 1000] [1, 1] : memref<8x1000xf32> to memref<1x1000xf32, strided<[1000, 1], offset: ?>>
    %xs = memref.subview %x[%i, 0] [1, 4096] [1, 1] : memref<8x4096xf32> to memref<1x4096xf32, strided<[4096, 1], offset: ?>>
    %ss = memref.subview %s[%i, 0] [1, 1] [1, 1] : memref<8x1xf32> to memref<1x1xf32, strided<[1, 1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
        ins(%ys : memref<1x1000xf32, strided<[1000, 1], offset: ?>>) outs(%ss : memref<1x1xf32, strided<[1, 1], offset: ?>>) {
    ^bb0(%a: f32, %o: f32):
      %r = arith.addf %a, %o : f32
      linalg.yield %r : f32
    }
    linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
        ins(%xs : memref<1x4096xf32, strided<[4096, 1], offset: ?>>) outs(%ss : memref<1x1xf32, strided<[1, 1], offset: ?>>) {
    ^bb0(%a: f32, %o: f32):
      %d = arith.mulf %a, %o : f32
      %r = arith.addf %d, %o : f32
      linalg.yield %r : f32
    }
  } {codegen.row_loop}
  return
}
