// RUN: vt-opt %s --codegen-gpu-pad-contractions | filecheck %s

// An f16 contraction whose m, n or k is not a multiple of 16 computes on zero-padded copies (the
// tensor-core schedule tiles by 16 with no partial tiles); the accumulator's valid corner is copied
// back. Aligned f16 contractions and f32 ones (SIMT, no padding needed) are left as they are.
// CHECK-LABEL: func.func @ragged
// CHECK:         %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<32x48xf16>
// CHECK:         linalg.fill ins(%{{.*}} : f16) outs(%[[A]] : memref<32x48xf16>)
// CHECK:         %[[AV:.*]] = memref.subview %[[A]][0, 0] [20, 40] [1, 1]
// CHECK:         linalg.copy {{.*}} ins(%arg0 : memref<20x40xf16>) outs(%[[AV]]
// CHECK:         %[[B:.*]] = memref.alloc() {alignment = 64 : i64} : memref<48x32xf16>
// CHECK:         %[[C:.*]] = memref.alloc() {alignment = 64 : i64} : memref<32x32xf32>
// CHECK:         %[[CV:.*]] = memref.subview %[[C]][0, 0] [20, 24] [1, 1]
// CHECK:         linalg.copy {{.*}} ins(%arg2 : memref<20x24xf32>) outs(%[[CV]]
// CHECK:         linalg.generic {{.*}} ins(%[[A]], %[[B]] : memref<32x48xf16>, memref<48x32xf16>) outs(%[[C]] : memref<32x32xf32>)
// CHECK:         linalg.copy {{.*}} ins(%[[CV]] : {{.*}}) outs(%arg2 : memref<20x24xf32>)
// CHECK-DAG:     memref.dealloc %[[A]]
// CHECK-DAG:     memref.dealloc %[[B]]
// CHECK-DAG:     memref.dealloc %[[C]]
// CHECK:         return
// CHECK-LABEL: func.func @aligned
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic {{.*}} ins(%arg0, %arg1 : memref<32x64xf16>, memref<64x16xf16>) outs(%arg2 : memref<32x16xf32>)
// CHECK-LABEL: func.func @single_precision
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic {{.*}} ins(%arg0, %arg1 : memref<20x40xf32>, memref<40x24xf32>) outs(%arg2 : memref<20x24xf32>)
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @ragged(%x: memref<20x40xf16>, %w: memref<40x24xf16>, %out: memref<20x24xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<20x40xf16>, memref<40x24xf16>) outs(%out : memref<20x24xf32>) {
  ^bb0(%p: f16, %q: f16, %acc: f32):
    %pe = arith.extf %p : f16 to f32
    %qe = arith.extf %q : f16 to f32
    %m = arith.mulf %pe, %qe : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @aligned(%x: memref<32x64xf16>, %w: memref<64x16xf16>, %out: memref<32x16xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<32x64xf16>, memref<64x16xf16>) outs(%out : memref<32x16xf32>) {
  ^bb0(%p: f16, %q: f16, %acc: f32):
    %pe = arith.extf %p : f16 to f32
    %qe = arith.extf %q : f16 to f32
    %m = arith.mulf %pe, %qe : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @single_precision(%x: memref<20x40xf32>, %w: memref<40x24xf32>, %out: memref<20x24xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w : memref<20x40xf32>, memref<40x24xf32>) outs(%out : memref<20x24xf32>) {
  ^bb0(%p: f32, %q: f32, %acc: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
