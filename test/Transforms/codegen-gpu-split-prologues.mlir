// RUN: vt-opt %s --codegen-gpu-split-prologues | filecheck %s

// The elementwise work fused into a contraction's operand (here a scale and a cast to f16) is
// computed once into a buffer by its own kernel; the contraction reads the buffer, keeping the
// widening cast, so tensor cores get plain f16 tiles. A plain contraction is left as it is, and so
// is a side read through compound indices (a convolution window: no buffer indexed by loops alone).
// CHECK-LABEL: func.func @scaled_lhs
// CHECK:         %[[BUF:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16x32xf16>
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%arg0, %arg1 : memref<16x32xf32>, memref<32xf32>) outs(%[[BUF]] : memref<16x32xf16>)
// CHECK:           arith.mulf
// CHECK:           arith.truncf
// CHECK:         linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[BUF]], %arg2 : memref<16x32xf16>, memref<32x16xf16>) outs(%arg3 : memref<16x16xf32>)
// CHECK:           arith.extf
// CHECK:           arith.extf
// CHECK-NOT:       arith.truncf
// CHECK:         memref.dealloc %[[BUF]]
// CHECK-LABEL: func.func @plain
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic {{.*}} ins(%arg0, %arg1 : memref<16x32xf16>, memref<32x16xf16>)
// CHECK-LABEL: func.func @compound_index
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic {{.*}} ins(%arg0, %arg1, %arg2 : memref<48xf32>, memref<32xf32>, memref<32x16xf32>)
#window = affine_map<(m, n, k) -> (m + k)>
#x = affine_map<(m, n, k) -> (m, k)>
#s = affine_map<(m, n, k) -> (k)>
#w = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @scaled_lhs(%x: memref<16x32xf32>, %scale: memref<32xf32>, %w: memref<32x16xf16>, %out: memref<16x16xf32>) {
  linalg.generic {indexing_maps = [#x, #s, #w, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %scale, %w : memref<16x32xf32>, memref<32xf32>, memref<32x16xf16>) outs(%out : memref<16x16xf32>) {
  ^bb0(%a: f32, %g: f32, %b: f16, %acc: f32):
    %n = arith.mulf %a, %g : f32
    %h = arith.truncf %n : f32 to f16
    %he = arith.extf %h : f16 to f32
    %be = arith.extf %b : f16 to f32
    %p = arith.mulf %he, %be : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}
func.func @plain(%x: memref<16x32xf16>, %w: memref<32x16xf16>, %out: memref<16x16xf32>) {
  linalg.generic {indexing_maps = [#x, #w, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<16x32xf16>, memref<32x16xf16>) outs(%out : memref<16x16xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %ae = arith.extf %a : f16 to f32
    %be = arith.extf %b : f16 to f32
    %p = arith.mulf %ae, %be : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}
func.func @compound_index(%x: memref<48xf32>, %scale: memref<32xf32>, %w: memref<32x16xf32>, %out: memref<16x16xf32>) {
  linalg.generic {indexing_maps = [#window, #s, #w, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %scale, %w : memref<48xf32>, memref<32xf32>, memref<32x16xf32>) outs(%out : memref<16x16xf32>) {
  ^bb0(%a: f32, %g: f32, %b: f32, %acc: f32):
    %n = arith.mulf %a, %g : f32
    %p = arith.mulf %n, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}
