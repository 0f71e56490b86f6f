// RUN: vt-opt %s --layout-select-ilp='target=cpu cost=time' | filecheck %s
// RUN: vt-opt %s --layout-select-ilp='target=cpu cost=time report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT

// cost=time (docs/layouts.md "Cost model"): a 1x1 convolution of a 32x32 image fills every lane in
// NCHW, and converting its NCHW argument and result would cost more than any layout gains: the
// function is left exactly as it was (no attribute, no conversion).
// CHECK-LABEL: func.func @block
// CHECK-NOT:     layout.
// CHECK:         linalg.conv_2d_nchw_fchw
// CHECK-NOT:     layout.
// CHECK:         return
func.func @block(%x: tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32> {
  %w = arith.constant dense<0.5> : tensor<32x32x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x32x32x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
         ins(%x, %w : tensor<1x32x32x32xf32>, tensor<32x32x1x1xf32>) outs(%init : tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
  return %y : tensor<1x32x32x32xf32>
}

// A 1x1 convolution of a 1x1 image: NCHW runs it as a Linear layer over the batch, vectors along the
// features but one image filling one of the register tile's 12 rows; nChw16c streams the filter
// with 16 channels per vector, and a 1x1 image converts for free (a reshape): blocked.
// CHECK-LABEL: func.func @pixel
// CHECK:         linalg.conv_2d_nchw_fchw
// CHECK-SAME:      layout.required = [{block_dims = array<i64: 1>, block_sizes = array<i64: 16>
// CHECK:         return
func.func @pixel(%x: tensor<1x512x1x1xf32>) -> tensor<1x2048x1x1xf32> {
  %w = arith.constant dense<0.5> : tensor<2048x512x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2048x1x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2048x1x1xf32>) -> tensor<1x2048x1x1xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
         ins(%x, %w : tensor<1x512x1x1xf32>, tensor<2048x512x1x1xf32>) outs(%init : tensor<1x2048x1x1xf32>) -> tensor<1x2048x1x1xf32>
  return %y : tensor<1x2048x1x1xf32>
}

// The same Linear over a batch of 12 images fills NCHW's register tile: kept as it was.
// CHECK-LABEL: func.func @batch
// CHECK-NOT:     layout.
// CHECK:         return
func.func @batch(%x: tensor<12x512x1x1xf32>) -> tensor<12x2048x1x1xf32> {
  %w = arith.constant dense<0.5> : tensor<2048x512x1x1xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<12x2048x1x1xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<12x2048x1x1xf32>) -> tensor<12x2048x1x1xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
         ins(%x, %w : tensor<12x512x1x1xf32>, tensor<2048x512x1x1xf32>) outs(%init : tensor<12x2048x1x1xf32>) -> tensor<12x2048x1x1xf32>
  return %y : tensor<12x2048x1x1xf32>
}

// REPORT: layout-select-ilp report (target cpu)
// REPORT-NEXT: func @block: conversions {{[0-9]+}} -> 0, {{.*}}; 0 kernel(s) in a non-row-major layout; time model [[T:[0-9.]+]] us chosen vs [[T]] us all row-major
// REPORT-NEXT: func @pixel: {{.*}}; {{[1-9][0-9]*}} kernel(s) in a non-row-major layout; time model
// REPORT-NEXT: func @batch: {{.*}}; 0 kernel(s) in a non-row-major layout; time model [[B:[0-9.]+]] us chosen vs [[B]] us all row-major
