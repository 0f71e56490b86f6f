// RUN: vt-opt %s --temco-remat-skip='distance-threshold=2' | filecheck %s
// RUN: vt-opt %s --temco-remat-skip='distance-threshold=2 report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --temco-remat-skip='distance-threshold=2 flops-threshold=1' | filecheck %s --check-prefix=FLOPS
// RUN: vt-opt %s --temco-remat-skip='distance-threshold=2 peak-ratio=0.5 report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=PEAK

// TeMCO Fig. 7 / Algs. 1-2: b = relu(lconv(a2)) is a skip connection (used by the next layer and by
// the add three layers later). FindReduced(b) = [lconv, relu] (IsLConv: 1x1, stride 1, 2 -> 8
// channels); the restore layers, with the lconv's bias broadcast, are cloned before the add, which
// then reads the clone; the near use (conv2) keeps the original b. The reduced tensor a2 (2 channels)
// is what lives across the skip now.

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// CHECK-LABEL: func.func @fig7
// CHECK-SAME:    %[[X:.*]]: tensor<1x8x4x4xf32>
// CHECK:         %[[A2:.*]] = linalg.conv_2d_nchw_fchw {{.*}}temco.role = "core"
// CHECK:         %[[A:.*]] = linalg.conv_2d_nchw_fchw {{.*}}temco.role = "lconv"{{.*}} ins(%[[A2]],
// CHECK:         %[[B:.*]] = linalg.generic {{.*}} ins(%[[A]] :
// CHECK:         %[[C:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[B]],
// CHECK:         %[[D:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[C]],
// CHECK:         %[[E:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[D]],
// CHECK:         %[[BIAS2:.*]] = linalg.broadcast
// CHECK-NEXT:    %[[A_:.*]] = linalg.conv_2d_nchw_fchw {{.*}}temco.role = "lconv"{{.*}} ins(%[[A2]], {{.*}} outs(%[[BIAS2]] :
// CHECK-NEXT:    %[[B_:.*]] = linalg.generic {{.*}} ins(%[[A_]] :
// CHECK:         linalg.add ins(%[[E]], %[[B_]] :

// REPORT: temco-remat-skip @fig7: 1 skip connection(s), 1 rematerialized
// REPORT-NEXT: %{{[0-9]+}} (512 B, live 3..7, distance 4, 1 far use(s)) at {{.*}}: rematerialized
// REPORT-NEXT: restore: linalg.conv_2d_nchw_fchw -> linalg.generic; reduced tensors 128 B; FLOPs {{[0-9]+}} (threshold {{[0-9]+}}); peak 1024 B (limit 1024 B)
// REPORT: temco-remat-skip @from_argument: 0 skip connection(s), 0 rematerialized

// FLOPS-LABEL: func.func @fig7
// FLOPS:       temco.role = "lconv"
// FLOPS-NOT:   temco.role = "lconv"
// FLOPS:       linalg.add

// PEAK: @fig7: 1 skip connection(s), 0 rematerialized
// PEAK: kept: restore peak above the limit

func.func @fig7(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %wf = arith.constant dense<0.5> : tensor<2x8x1x1xf32>
  %wc = arith.constant dense<0.25> : tensor<2x2x1x1xf32>
  %wl = arith.constant dense<0.125> : tensor<8x2x1x1xf32>
  %bias = arith.constant dense<0.1> : tensor<8xf32>
  %w8 = arith.constant dense<0.01> : tensor<8x8x1x1xf32>
  %e8 = tensor.empty() : tensor<1x8x4x4xf32>
  %e2 = tensor.empty() : tensor<1x2x4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %a1 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>, temco.layer = 0 : i64, temco.role = "fconv"} ins(%x, %wf : tensor<1x8x4x4xf32>, tensor<2x8x1x1xf32>) outs(%f2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %a2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>, temco.layer = 0 : i64, temco.role = "core"} ins(%a1, %wc : tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) outs(%f2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %bb = linalg.broadcast ins(%bias : tensor<8xf32>) outs(%e8 : tensor<1x8x4x4xf32>) dimensions = [0, 2, 3]
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>, temco.layer = 0 : i64, temco.role = "lconv"} ins(%a2, %wl : tensor<1x2x4x4xf32>, tensor<8x2x1x1xf32>) outs(%bb : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : tensor<1x8x4x4xf32>) outs(%e8 : tensor<1x8x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x4x4xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%b, %w8 : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) outs(%f8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %d = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%c, %w8 : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) outs(%f8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %e = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%d, %w8 : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) outs(%f8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %y = linalg.add ins(%e, %b : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) outs(%e8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  return %y : tensor<1x8x4x4xf32>
}

// The long-lived tensor is the function's input: not a node of L (Alg. 1 looks at layer outputs), and
// nothing to restore it from; the function is left alone.
// CHECK-LABEL: func.func @from_argument
// CHECK-NOT:     temco.role
// CHECK:         linalg.add ins(%{{.*}}, %arg0 :
func.func @from_argument(%x: tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %w8 = arith.constant dense<0.01> : tensor<8x8x1x1xf32>
  %e8 = tensor.empty() : tensor<1x8x4x4xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w8 : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) outs(%f8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %d = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%c, %w8 : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) outs(%f8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %e = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%d, %w8 : tensor<1x8x4x4xf32>, tensor<8x8x1x1xf32>) outs(%f8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %y = linalg.add ins(%e, %x : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) outs(%e8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  return %y : tensor<1x8x4x4xf32>
}
