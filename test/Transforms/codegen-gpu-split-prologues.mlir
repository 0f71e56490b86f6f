// RUN: vt-opt %s --codegen-gpu-split-prologues | filecheck %s

// The elementwise work fused into a contraction's operand (here a scale and a cast to f16) is
// computed once into a buffer by its own kernel; the contraction reads the buffer, keeping the
// widening cast, so tensor cores get plain f16 tiles. A plain contraction is left as it is. A side
// read through compound indices (a 1x1 convolution's image at `oh + kh`, its per-channel scale at
// `c`) is computed over the image's indices and read through the same ones (still a convolution);
// one whose other input reads an index the widest one does not have is left as it is.
// CHECK-DAG: #[[ID4:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[C:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>
// CHECK-DAG: #[[IMAGE:.*]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d4, d2 + d5, d3 + d6)>
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
// CHECK-LABEL: func.func @scaled_convolution_input
// CHECK:         %[[IMG:.*]] = memref.alloc() {alignment = 64 : i64} : memref<1x32x6x6xf16>
// CHECK:         linalg.generic {indexing_maps = [#[[ID4]], #[[C]], #[[ID4]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0, %arg1 : memref<1x32x6x6xf32>, memref<32x1x1xf32>) outs(%[[IMG]] : memref<1x32x6x6xf16>)
// CHECK:           arith.mulf
// CHECK:           arith.truncf
// CHECK:         linalg.generic {indexing_maps = [#[[IMAGE]], {{.*}} ins(%[[IMG]], %arg2 : memref<1x32x6x6xf16>, memref<16x32x1x1xf16>) outs(%arg3 : memref<1x16x6x6xf32>)
// CHECK:         memref.dealloc %[[IMG]]
// CHECK-LABEL: func.func @compound_index
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic {{.*}} ins(%arg0, %arg1, %arg2 : memref<48xf32>, memref<32xf32>, memref<32x16xf32>)
#window = affine_map<(m, n, k) -> (m + k)>
#x = affine_map<(m, n, k) -> (m, k)>
#s = affine_map<(m, n, k) -> (k)>
#w = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#image = affine_map<(n, f, oh, ow, c, kh, kw) -> (n, c, oh + kh, ow + kw)>
#channel = affine_map<(n, f, oh, ow, c, kh, kw) -> (c, 0, 0)>
#filter = affine_map<(n, f, oh, ow, c, kh, kw) -> (f, c, kh, kw)>
#conv_out = affine_map<(n, f, oh, ow, c, kh, kw) -> (n, f, oh, ow)>
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
func.func @scaled_convolution_input(%x: memref<1x32x6x6xf32>, %scale: memref<32x1x1xf32>, %w: memref<16x32x1x1xf16>, %out: memref<1x16x6x6xf32>) {
  linalg.generic {indexing_maps = [#image, #channel, #filter, #conv_out],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %scale, %w : memref<1x32x6x6xf32>, memref<32x1x1xf32>, memref<16x32x1x1xf16>) outs(%out : memref<1x16x6x6xf32>) {
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
