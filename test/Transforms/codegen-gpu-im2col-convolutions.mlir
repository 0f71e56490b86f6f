// RUN: vt-opt %s --codegen-gpu-im2col-convolutions | filecheck %s

// A convolution (kernel level, padding already explicit) becomes a copy of the batch's input windows
// into P[n, c, kh, kw, oh, ow] -- an identity linalg.copy from a reinterpret_cast of the input with
// one stride per dimension (stride and dilation folded in, overlapping) -- and a batch matmul
// out[n, f, (oh, ow)] += W[f, (c, kh, kw)] * P[n, (c, kh, kw), (oh, ow)] over collapsed views, the
// filter first (the tensor cores' A), with the convolution's body (an f16 model's extf's kept).
// CHECK-DAG:   #[[$WMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d3)>
// CHECK-DAG:   #[[$PMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// CHECK-DAG:   #[[$OMAP:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-DAG:   #[[$GWMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d2, d4)>
// CHECK-DAG:   #[[$GPMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
// CHECK-DAG:   #[[$GOMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @conv3x3
// CHECK:         %[[WIN:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [2, 16, 3, 3, 20, 20], strides: [7744, 484, 22, 1, 22, 1]
// CHECK:         %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x16x3x3x20x20xf32>
// CHECK:         linalg.copy {{.*}} ins(%[[WIN]] : {{.*}}) outs(%[[P]] : memref<2x16x3x3x20x20xf32>)
// CHECK:         %[[PM:.*]] = memref.collapse_shape %[[P]] {{\[}}[0], [1, 2, 3], [4, 5]] : memref<2x16x3x3x20x20xf32> into memref<2x144x400xf32>
// CHECK:         %[[WM:.*]] = memref.collapse_shape %arg1 {{\[}}[0], [1, 2, 3]] : memref<32x16x3x3xf32> into memref<32x144xf32>
// CHECK:         %[[OM:.*]] = memref.collapse_shape %arg2 {{\[}}[0], [1], [2, 3]] : memref<2x32x20x20xf32> into memref<2x32x400xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[$WMAP]], #[[$PMAP]], #[[$OMAP]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:        ins(%[[WM]], %[[PM]] : memref<32x144xf32>, memref<2x144x400xf32>) outs(%[[OM]] : memref<2x32x400xf32>)
// CHECK:         ^bb0(%[[W:.*]]: f32, %[[X:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:           %[[M:.*]] = arith.mulf %[[W]], %[[X]] : f32
// CHECK:           arith.addf %[[ACC]], %[[M]] : f32
// CHECK:         memref.dealloc %[[P]]
// CHECK-NOT:     linalg.generic
// CHECK:         return

// Stride 2 and dilation 2 over views (a batch slice of the input, a channel slice of a concat
// output, part of a filter): strides [n, c, 2*32 (kh), 2 (kw), 2*32 (oh), 2 (ow)], the view's offset.
// CHECK-LABEL: func.func @strided_dilated_f16
// CHECK:         memref.reinterpret_cast %{{.*}} to offset: [8192], sizes: [2, 8, 3, 3, 12, 12], strides: [8192, 1024, 64, 2, 64, 2]
// CHECK:         memref.alloc() {alignment = 64 : i64} : memref<2x8x3x3x12x12xf16>
// CHECK:         memref.collapse_shape {{.*}} into memref<8x72xf16, strided<[72, 1]>>
// CHECK:         memref.collapse_shape {{.*}} into memref<2x8x144xf32, strided<[2304, 144, 1], offset: 576>>
// CHECK:         linalg.generic
// CHECK-SAME:        ins(%{{.*}}, %{{.*}} : memref<8x72xf16, strided<[72, 1]>>, memref<2x72x144xf16>)
// CHECK:         ^bb0(%[[W:.*]]: f16, %[[X:.*]]: f16, %{{.*}}: f32):
// CHECK-DAG:       %[[XE:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK-DAG:       %[[WE:.*]] = arith.extf %[[W]] : f16 to f32
// CHECK:           arith.mulf %[[WE]], %[[XE]] : f32

// A depthwise convolution (groups = channels: no channel reduction) is left as it is.
// CHECK-LABEL: func.func @depthwise
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         linalg.generic {{.*}} ins(%arg0, %arg1 : memref<2x16x22x22xf32>, memref<16x3x3xf32>)

// A 1x1 stride-1 convolution over whole image rows reads its input as P (no copy); a 1x1 stride-2
// one (a ResNet downsample) gathers its strided pixels: P[n, c, 1, 1, oh, ow], K = C.
// CHECK-LABEL: func.func @pointwise
// CHECK-NOT:     memref.reinterpret_cast
// CHECK-NOT:     memref.alloc
// CHECK:         %[[X:.*]] = memref.collapse_shape %arg0 {{\[}}[0], [1], [2, 3]] : memref<2x16x8x8xf32> into memref<2x16x64xf32>
// CHECK:         %[[W:.*]] = memref.collapse_shape %arg1 {{\[}}[0], [1, 2, 3]] : memref<32x16x1x1xf32> into memref<32x16xf32>
// CHECK:         linalg.generic
// CHECK-SAME:        ins(%[[W]], %[[X]] : memref<32x16xf32>, memref<2x16x64xf32>) outs(%{{.*}} : memref<2x32x64xf32>)
// CHECK-LABEL: func.func @pointwise_strided
// CHECK:         memref.reinterpret_cast %arg0 to offset: [0], sizes: [2, 16, 1, 1, 4, 4], strides: [1024, 64, 8, 1, 16, 2]
// CHECK:         linalg.generic
// CHECK-SAME:        ins(%{{.*}}, %{{.*}} : memref<32x16xf32>, memref<2x16x16xf32>) outs(%{{.*}} : memref<2x32x16xf32>)

// A grouped convolution (linalg.conv_2d_ngchw_gfchw generalised: the groups g read by the input, the
// filter and the output) is a batch matmul over the groups: P[n, g, c, kh, kw, oh, ow] from the
// windows, out[n, g, f, (oh, ow)] += W[g, f, (c, kh, kw)] * P[n, g, (c, kh, kw), (oh, ow)].
// CHECK-LABEL: func.func @grouped3x3
// CHECK:         %[[WIN:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [2, 4, 8, 3, 3, 8, 8], strides: [3200, 800, 100, 10, 1, 10, 1]
// CHECK:         %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x4x8x3x3x8x8xf32>
// CHECK:         linalg.copy {{.*}} ins(%[[WIN]] : {{.*}}) outs(%[[P]] : memref<2x4x8x3x3x8x8xf32>)
// CHECK:         %[[PM:.*]] = memref.collapse_shape %[[P]] {{\[}}[0], [1], [2, 3, 4], [5, 6]] : memref<2x4x8x3x3x8x8xf32> into memref<2x4x72x64xf32>
// CHECK:         %[[WM:.*]] = memref.collapse_shape %arg1 {{\[}}[0], [1], [2, 3, 4]] : memref<4x16x8x3x3xf32> into memref<4x16x72xf32>
// CHECK:         %[[OM:.*]] = memref.collapse_shape %arg2 {{\[}}[0], [1], [2], [3, 4]] : memref<2x4x16x8x8xf32> into memref<2x4x16x64xf32>
// CHECK:         linalg.generic {indexing_maps = [#[[$GWMAP]], #[[$GPMAP]], #[[$GOMAP]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
// CHECK-SAME:        ins(%[[WM]], %[[PM]] : memref<4x16x72xf32>, memref<2x4x72x64xf32>) outs(%[[OM]] : memref<2x4x16x64xf32>)
// CHECK:         memref.dealloc %[[P]]

// A grouped 1x1 convolution over whole image rows (vtc_efficientvit_block's aggregation, f16 with
// an f32 accumulator) reads its input as the groups' matrices: no copy.
// CHECK-LABEL: func.func @grouped_pointwise_f16
// CHECK-NOT:     memref.alloc
// CHECK:         %[[X:.*]] = memref.collapse_shape %arg0 {{\[}}[0], [1], [2], [3, 4]] : memref<1x6x8x6x6xf16> into memref<1x6x8x36xf16>
// CHECK:         %[[W:.*]] = memref.collapse_shape %arg1 {{\[}}[0], [1], [2, 3, 4]] : memref<6x8x8x1x1xf16> into memref<6x8x8xf16>
// CHECK:         linalg.generic
// CHECK-SAME:        ins(%[[W]], %[[X]] : memref<6x8x8xf16>, memref<1x6x8x36xf16>) outs(%{{.*}} : memref<1x6x8x36xf32>)

// One channel per group (a depthwise convolution with a channel multiplier of 2, in the grouped
// form): K would be KH·KW alone; left to the threads schedule.
// CHECK-LABEL: func.func @grouped_one_channel_per_group
// CHECK-NOT:     memref.reinterpret_cast
// CHECK:         linalg.generic {{.*}} ins(%arg0, %arg1 : memref<2x4x1x10x10xf32>, memref<4x2x1x3x3xf32>)
#pw_in = affine_map<(n, f, oh, ow, c, kh, kw) -> (n, c, oh + kh, ow + kw)>
#pw2_in = affine_map<(n, f, oh, ow, c, kh, kw) -> (n, c, 2 * oh + kh, 2 * ow + kw)>
#in = affine_map<(n, f, oh, ow, c, kh, kw) -> (n, c, oh + kh, ow + kw)>
#w = affine_map<(n, f, oh, ow, c, kh, kw) -> (f, c, kh, kw)>
#out = affine_map<(n, f, oh, ow, c, kh, kw) -> (n, f, oh, ow)>
#in2 = affine_map<(n, f, oh, ow, c, kh, kw) -> (n, c, 2 * oh + 2 * kh, 2 * ow + 2 * kw)>
#dw_in = affine_map<(n, c, oh, ow, kh, kw) -> (n, c, oh + kh, ow + kw)>
#dw_w = affine_map<(n, c, oh, ow, kh, kw) -> (c, kh, kw)>
#dw_out = affine_map<(n, c, oh, ow, kh, kw) -> (n, c, oh, ow)>
#g_in = affine_map<(n, g, f, oh, ow, c, kh, kw) -> (n, g, c, oh + kh, ow + kw)>
#g_w = affine_map<(n, g, f, oh, ow, c, kh, kw) -> (g, f, c, kh, kw)>
#g_out = affine_map<(n, g, f, oh, ow, c, kh, kw) -> (n, g, f, oh, ow)>
func.func @conv3x3(%x: memref<2x16x22x22xf32>, %w: memref<32x16x3x3xf32>, %out: memref<2x32x20x20xf32>) {
  linalg.generic {indexing_maps = [#in, #w, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w : memref<2x16x22x22xf32>, memref<32x16x3x3xf32>) outs(%out : memref<2x32x20x20xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @strided_dilated_f16(%x: memref<4x8x32x32xf16>, %w: memref<16x8x3x3xf16>, %out: memref<4x16x12x12xf32>) {
  %v = memref.subview %x[1, 0, 0, 0] [2, 8, 32, 32] [1, 1, 1, 1] : memref<4x8x32x32xf16> to memref<2x8x32x32xf16, strided<[8192, 1024, 32, 1], offset: 8192>>
  %o = memref.subview %out[0, 4, 0, 0] [2, 8, 12, 12] [1, 1, 1, 1] : memref<4x16x12x12xf32> to memref<2x8x12x12xf32, strided<[2304, 144, 12, 1], offset: 576>>
  %wv = memref.subview %w[0, 0, 0, 0] [8, 8, 3, 3] [1, 1, 1, 1] : memref<16x8x3x3xf16> to memref<8x8x3x3xf16, strided<[72, 9, 3, 1]>>
  linalg.generic {indexing_maps = [#in2, #w, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%v, %wv : memref<2x8x32x32xf16, strided<[8192, 1024, 32, 1], offset: 8192>>, memref<8x8x3x3xf16, strided<[72, 9, 3, 1]>>)
      outs(%o : memref<2x8x12x12xf32, strided<[2304, 144, 12, 1], offset: 576>>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %ae = arith.extf %a : f16 to f32
    %be = arith.extf %b : f16 to f32
    %m = arith.mulf %ae, %be : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @depthwise(%x: memref<2x16x22x22xf32>, %w: memref<16x3x3xf32>, %out: memref<2x16x20x20xf32>) {
  linalg.generic {indexing_maps = [#dw_in, #dw_w, #dw_out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %w : memref<2x16x22x22xf32>, memref<16x3x3xf32>) outs(%out : memref<2x16x20x20xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @pointwise(%x: memref<2x16x8x8xf32>, %w: memref<32x16x1x1xf32>, %out: memref<2x32x8x8xf32>) {
  linalg.generic {indexing_maps = [#pw_in, #w, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w : memref<2x16x8x8xf32>, memref<32x16x1x1xf32>) outs(%out : memref<2x32x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @pointwise_strided(%x: memref<2x16x8x8xf32>, %w: memref<32x16x1x1xf32>, %out: memref<2x32x4x4xf32>) {
  linalg.generic {indexing_maps = [#pw2_in, #w, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w : memref<2x16x8x8xf32>, memref<32x16x1x1xf32>) outs(%out : memref<2x32x4x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @grouped3x3(%x: memref<2x4x8x10x10xf32>, %w: memref<4x16x8x3x3xf32>, %out: memref<2x4x16x8x8xf32>) {
  linalg.generic {indexing_maps = [#g_in, #g_w, #g_out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w : memref<2x4x8x10x10xf32>, memref<4x16x8x3x3xf32>) outs(%out : memref<2x4x16x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @grouped_pointwise_f16(%x: memref<1x6x8x6x6xf16>, %w: memref<6x8x8x1x1xf16>, %out: memref<1x6x8x6x6xf32>) {
  linalg.generic {indexing_maps = [#g_in, #g_w, #g_out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w : memref<1x6x8x6x6xf16>, memref<6x8x8x1x1xf16>) outs(%out : memref<1x6x8x6x6xf32>) {
  ^bb0(%a: f16, %b: f16, %acc: f32):
    %ae = arith.extf %a : f16 to f32
    %be = arith.extf %b : f16 to f32
    %m = arith.mulf %ae, %be : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
func.func @grouped_one_channel_per_group(%x: memref<2x4x1x10x10xf32>, %w: memref<4x2x1x3x3xf32>, %out: memref<2x4x2x8x8xf32>) {
  linalg.generic {indexing_maps = [#g_in, #g_w, #g_out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w : memref<2x4x1x10x10xf32>, memref<4x2x1x3x3xf32>) outs(%out : memref<2x4x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
