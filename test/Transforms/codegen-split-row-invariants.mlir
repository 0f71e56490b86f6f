// RUN: vt-opt %s --codegen-split-row-invariants | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
#col = affine_map<(d0, d1) -> (d1)>

// A LayerNorm's last kernel: rsqrt(var / N + eps) depends only on the row, so it moves into a kernel
// over the row's shape; the subtraction of the mean (cheap) and the scale stay per element.
// CHECK-LABEL: func.func @layernorm_scale
// CHECK:         %[[R:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x1xf32>
// CHECK:         linalg.generic {{.*}} ins(%{{.*}} : memref<8x1xf64>) outs(%[[R]] : memref<8x1xf32>)
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      arith.divf
// CHECK-NEXT:      arith.truncf
// CHECK-NEXT:      arith.addf
// CHECK-NEXT:      math.rsqrt
// CHECK-NEXT:      linalg.yield
// CHECK:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %{{.*}}, %[[R]] : memref<8x32xf32>, memref<8x1xf32>, memref<32xf32>, memref<8x1xf32>) outs(%{{.*}} : memref<8x32xf32>) attrs =  {test.mark}
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[M:.*]]: f32, %[[G:.*]]: f32, %[[S:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[C:.*]] = arith.subf %[[X]], %[[M]] : f32
// CHECK-NEXT:      %[[N:.*]] = arith.mulf %[[C]], %[[S]] : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.mulf %[[N]], %[[G]] : f32
// CHECK-NEXT:      linalg.yield %[[Y]] : f32
// CHECK:         memref.dealloc %[[R]] : memref<8x1xf32>
func.func @layernorm_scale(%x: memref<8x32xf32>, %mean: memref<8x1xf32>, %var: memref<8x1xf64>,
                           %gamma: memref<32xf32>, %y: memref<8x32xf32>) {
  %n = arith.constant 3.200000e+01 : f64
  %eps = arith.constant 1.000000e-05 : f32
  linalg.generic {indexing_maps = [#id, #row, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean, %var, %gamma : memref<8x32xf32>, memref<8x1xf32>, memref<8x1xf64>, memref<32xf32>)
      outs(%y : memref<8x32xf32>) attrs = {test.mark} {
  ^bb0(%in: f32, %m: f32, %v: f64, %g: f32, %out: f32):
    %0 = arith.divf %v, %n : f64
    %1 = arith.truncf %0 : f64 to f32
    %2 = arith.addf %1, %eps : f32
    %3 = math.rsqrt %2 : f32
    %4 = arith.subf %in, %m : f32
    %5 = arith.mulf %4, %3 : f32
    %6 = arith.mulf %5, %g : f32
    linalg.yield %6 : f32
  }
  return
}

// Only cheap arithmetic on the row's values: nothing moves.
// CHECK-LABEL: func.func @cheap
// CHECK-NOT:     memref.alloc
// CHECK:         linalg.generic
// CHECK-NOT:     linalg.generic
func.func @cheap(%x: memref<8x32xf32>, %mean: memref<8x1xf32>, %y: memref<8x32xf32>) {
  %two = arith.constant 2.000000e+00 : f32
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean : memref<8x32xf32>, memref<8x1xf32>) outs(%y : memref<8x32xf32>) {
  ^bb0(%in: f32, %m: f32, %out: f32):
    %0 = arith.mulf %m, %two : f32
    %1 = arith.subf %in, %0 : f32
    linalg.yield %1 : f32
  }
  return
}

// A BatchNorm + ReLU in a channels-last kernel: 1 / sqrt(var + eps) is the channel's, computed along
// the vectors (the channels) but the same for every pixel: it moves into a kernel over the channels.
// CHECK-LABEL: func.func @nhwc_batchnorm
// CHECK:         %[[R:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x1x1xf32>
// CHECK:         linalg.generic {{.*}} ins(%arg2 : memref<8x1x1xf32>) outs(%[[R]] : memref<8x1x1xf32>)
// CHECK-NEXT:    ^bb0(
// CHECK-NEXT:      arith.addf
// CHECK-NEXT:      math.sqrt
// CHECK-NEXT:      arith.divf
// CHECK-NEXT:      linalg.yield
// CHECK:         linalg.generic {{.*}} ins(%arg0, %arg1, %[[R]] : memref<2x4x4x8xf32>, memref<8x1x1xf32>, memref<8x1x1xf32>) outs(%arg3 : memref<2x4x4x8xf32>)
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[M:.*]]: f32, %[[S:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[C:.*]] = arith.subf %[[X]], %[[M]] : f32
// CHECK-NEXT:      %[[N:.*]] = arith.mulf %[[C]], %[[S]] : f32
// CHECK-NEXT:      arith.maximumf %[[N]]
// CHECK-NOT:       math.sqrt
// CHECK:         memref.dealloc %[[R]] : memref<8x1x1xf32>
func.func @nhwc_batchnorm(%x: memref<2x4x4x8xf32>, %mean: memref<8x1x1xf32>, %var: memref<8x1x1xf32>, %y: memref<2x4x4x8xf32>) {
  %eps = arith.constant 1.000000e-05 : f32
  %one = arith.constant 1.000000e+00 : f32
  %zero = arith.constant 0.000000e+00 : f32
  linalg.generic {indexing_maps = [affine_map<(n, h, w, c) -> (n, h, w, c)>, affine_map<(n, h, w, c) -> (c, 0, 0)>,
                                   affine_map<(n, h, w, c) -> (c, 0, 0)>, affine_map<(n, h, w, c) -> (n, h, w, c)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %mean, %var : memref<2x4x4x8xf32>, memref<8x1x1xf32>, memref<8x1x1xf32>) outs(%y : memref<2x4x4x8xf32>) {
  ^bb0(%in: f32, %m: f32, %v: f32, %out: f32):
    %0 = arith.addf %v, %eps : f32
    %1 = math.sqrt %0 : f32
    %2 = arith.divf %one, %1 : f32
    %3 = arith.subf %in, %m : f32
    %4 = arith.mulf %3, %2 : f32
    %5 = arith.maximumf %4, %zero : f32
    linalg.yield %5 : f32
  }
  return
}
