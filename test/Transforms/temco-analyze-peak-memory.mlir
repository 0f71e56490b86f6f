// RUN: vt-opt %s --temco-analyze-peak-memory='report=-' -o /dev/null 2>&1 | filecheck %s
// RUN: vt-opt %s --temco-analyze-peak-memory | filecheck %s --check-prefix=IR
// RUN: vt-opt %s --temco-analyze-peak-memory='report=- json=true timeline=false' -o /dev/null 2>&1 | filecheck %s --check-prefix=JSON
// RUN: vt-opt %s --temco-analyze-peak-memory='plot=%t.png' -o /dev/null && %python -c "import sys; d = open(sys.argv[1], 'rb').read(); assert d[:8] == b'\x89PNG\r\n\x1a\n', d[:8]" %t.png
// RUN: not vt-opt %s --temco-analyze-peak-memory='plot=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=PLOT-STDOUT
// PLOT-STDOUT: error: temco-analyze-peak-memory: plot=- is not supported: plot writes a binary file, give it a path

// TeMCO §2.2: internal tensors are allocated by the op producing them and freed after their last use;
// weights are counted apart. A residual 1x1 conv chain, by hand (f32, bytes):
//   x 1x4x8x8 = 1024 (kept to the add: a skip connection), a, r 1x8x8x8 = 2048, b, y 1x4x8x8 = 1024
//   step 0 conv1: x + a      = 3072
//   step 1 relu:  x + a + r  = 5120   <- peak (the paper's 2C'H'W' plus the skip)
//   step 2 conv2: x + r + b  = 4096
//   step 3 add:   x + b + y  = 3072
//   step 4 return:         y = 1024
// Weights: 8x4 + 4x8 floats = 256 bytes. The zero fills only initialise the convs' outputs.

// CHECK-LABEL: temco-analyze-peak-memory report
// CHECK-NEXT:  func @residual_chain: internal peak 5120 bytes at step 1 (linalg.generic %{{.*}}); weights 256 bytes in 2 constant(s); 5 steps, 5 buffers
// CHECK-NEXT:    live at peak:
// CHECK-NEXT:      %{{[0-9]+}} 2048 bytes internal linalg.conv_2d_nchw_fchw steps 0..1
// CHECK-NEXT:      %{{[0-9]+}} 2048 bytes internal linalg.generic steps 1..2
// CHECK-NEXT:      %arg0 1024 bytes input argument steps 0..3
// CHECK-NEXT:    timeline:
// CHECK-NEXT:         0         3072  linalg.conv_2d_nchw_fchw
// CHECK-NEXT:         1         5120  linalg.generic
// CHECK-NEXT:         2         4096  linalg.conv_2d_nchw_fchw
// CHECK-NEXT:         3         3072  linalg.add
// CHECK-NEXT:         4         1024  func.return

// In place: the bias broadcast and the conv accumulating into it share one buffer (one-shot
// bufferization writes the conv into its init); the broadcast allocates it one step earlier.
//   step 0 broadcast: x + acc = 256 + 512;  step 1 conv: x + acc (same buffer) = 768;  step 2 return: 512
// CHECK-LABEL: func @bias_in_place: internal peak 768 bytes at step 0 (linalg.broadcast %broadcasted); weights 160 bytes in 2 constant(s); 3 steps, 2 buffers
// CHECK:         timeline:
// CHECK-NEXT:         0          768  linalg.broadcast
// CHECK-NEXT:         1          768  linalg.conv_2d_nchw_fchw
// CHECK-NEXT:         2          512  func.return

// vt.store_into writes into its destination (VTC: the producer of %u computes straight into %d's
// rows 3..4 after vt-lower-views): its result aliases %d, no buffer of its own.
//   step 0: c + d + x = 288;  step 1: d + u + x = 192;  step 2 store: d + u = 160;  step 3: d + s = 256
// CHECK-LABEL: func @store_in_place: internal peak 288 bytes at step 0 (linalg.generic %{{.*}}); weights 0 bytes in 0 constant(s); 5 steps, 5 buffers
// CHECK:         timeline:
// CHECK-NEXT:         0          288  linalg.generic
// CHECK-NEXT:         1          192  linalg.generic
// CHECK-NEXT:         2          160  vt.store_into
// CHECK-NEXT:         3          256  linalg.generic
// CHECK-NEXT:         4          128  func.return

// IR-LABEL: func.func @residual_chain
// IR-NOT:     temco

// JSON:      "function": "residual_chain",
// JSON-NEXT: "peak_bytes": 5120,
// JSON-NEXT: "peak_step": 1,
// JSON-NEXT: "weight_bytes": 256,
// JSON-NEXT: "weight_count": 2,
// JSON-NEXT: "usage": [
// JSON-NEXT:   3072,
// JSON-NEXT:   5120,
// JSON-NEXT:   4096,
// JSON-NEXT:   3072,
// JSON-NEXT:   1024
// JSON-NEXT: ],

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @residual_chain(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %w1 = arith.constant dense<0.5> : tensor<8x4x1x1xf32>
  %w2 = arith.constant dense<0.25> : tensor<4x8x1x1xf32>
  %e8 = tensor.empty() : tensor<1x8x8x8xf32>
  %z8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
       ins(%x, %w1 : tensor<1x4x8x8xf32>, tensor<8x4x1x1xf32>) outs(%z8 : tensor<1x8x8x8xf32>) -> tensor<1x8x8x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
       ins(%a : tensor<1x8x8x8xf32>) outs(%e8 : tensor<1x8x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x8x8xf32>
  %e4 = tensor.empty() : tensor<1x4x8x8xf32>
  %z4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %b = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
       ins(%r, %w2 : tensor<1x8x8x8xf32>, tensor<4x8x1x1xf32>) outs(%z4 : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %y = linalg.add ins(%b, %x : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) outs(%e4 : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return %y : tensor<1x4x8x8xf32>
}

func.func @bias_in_place(%x: tensor<1x4x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %w = arith.constant dense<1.0> : tensor<8x4x1x1xf32>
  %bias = arith.constant dense<0.5> : tensor<8xf32>
  %e = tensor.empty() : tensor<1x8x4x4xf32>
  %acc = linalg.broadcast ins(%bias : tensor<8xf32>) outs(%e : tensor<1x8x4x4xf32>) dimensions = [0, 2, 3]
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}
       ins(%x, %w : tensor<1x4x4x4xf32>, tensor<8x4x1x1xf32>) outs(%acc : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  return %y : tensor<1x8x4x4xf32>
}

func.func @store_in_place(%x: tensor<2x4xf32>, %c: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %e8 = tensor.empty() : tensor<8x4xf32>
  %d = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
       ins(%c : tensor<8x4xf32>) outs(%e8 : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<8x4xf32>
  %e2 = tensor.empty() : tensor<2x4xf32>
  %u = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
       ins(%x : tensor<2x4xf32>) outs(%e2 : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<2x4xf32>
  %r = "vt.store_into"(%u, %d) {mapping = [{map = affine_map<(d0, d1) -> (d0 + 3, d1)>, source = 0 : i64}], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %s = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
       ins(%r : tensor<8x4xf32>) outs(%e8 : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}
