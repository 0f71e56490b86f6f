// RUN: vt-opt %s --temco-fuse-activation='tile-width=4' | filecheck %s
// RUN: vt-opt %s --temco-fuse-activation='tile-width=4 report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --temco-fuse-activation='fuse-pooling=false split-concat=false' | filecheck %s --check-prefix=NOPOOL
// RUN: not vt-opt %s --temco-fuse-activation='tile-width=4' --gpu-sequentialize-forall -o /dev/null 2>&1 | filecheck %s --check-prefix=GPU
// RUN: not vt-opt %s --temco-fuse-activation='tile-width=-1' -o /dev/null 2>&1 | filecheck %s --check-prefix=BAD
// RUN: vt-opt %s --temco-fuse-activation='where=peak' | filecheck %s --check-prefix=PEAK
// RUN: vt-opt %s --temco-fuse-activation='where=peak report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=PEAK-REPORT
// RUN: vt-opt %s --temco-fuse-activation='where=peak tile-width=4 report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=PEAK-WIDE
// RUN: not vt-opt %s --temco-fuse-activation='where=near' -o /dev/null 2>&1 | filecheck %s --check-prefix=BAD-WHERE

// TeMCO §3.2 (Fig. 8, Listing 1): lconv (1x1, 2 -> 8 channels, bias) -> ReLU -> fconv (1x1, 8 -> 2)
// becomes one scf.forall over (N, H, W / tile-width) tiles; inside, the lconv, the activation and
// the fconv run on a 1x8x1x4 tile, so no 1x8x4x8 tensor is computed any more.

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>

// CHECK-LABEL: func.func @lconv_relu_fconv
// CHECK-SAME:    %[[X:.*]]: tensor<1x2x4x8xf32>
// CHECK-NOT:     tensor<1x8x4x8xf32>
// CHECK:         scf.forall (%[[N:.*]], %[[H:.*]], %[[W:.*]]) in (1, 4, 2) shared_outs(%[[OUT:.*]] = %{{.*}}) -> (tensor<1x2x4x8xf32>)
// CHECK:           %[[XT:.*]] = tensor.extract_slice %[[X]][%[[N]], 0, %[[H]], %{{.*}}] [1, 2, 1, 4]
// CHECK:           %[[B:.*]] = linalg.broadcast {{.*}} outs(%{{.*}} : tensor<1x8x1x4xf32>)
// CHECK:           %[[L:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[XT]], %{{.*}} : tensor<1x2x1x4xf32>, tensor<8x2x1x1xf32>) outs(%[[B]] : tensor<1x8x1x4xf32>)
// CHECK:           %[[R:.*]] = linalg.generic {{.*}} ins(%[[L]] : tensor<1x8x1x4xf32>)
// CHECK:           %[[F:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[R]], %{{.*}} : tensor<1x8x1x4xf32>, tensor<2x8x1x1xf32>) outs(%{{.*}} : tensor<1x2x1x4xf32>)
// CHECK:           tensor.parallel_insert_slice %[[F]] into %[[OUT]][%[[N]], 0, %[[H]], %{{.*}}] [1, 2, 1, 4]
// CHECK:         } {temco.fused = "lconv-act-fconv"}
// CHECK-NOT:     tensor<1x8x4x8xf32>
// CHECK:         return

// REPORT: temco-fuse-activation @lconv_relu_fconv: 1 fused group(s), 0 concat split(s)
// REPORT-NEXT: fused conv_2d_nchw_fchw -> generic -> fconv at {{.*}}: tile [1, 2, 1, 4], full-size intermediates avoided 2048 B
func.func @lconv_relu_fconv(%x: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %wl = arith.constant dense<0.5> : tensor<8x2x1x1xf32>
  %bias = arith.constant dense<0.1> : tensor<8xf32>
  %wf = arith.constant dense<0.25> : tensor<2x8x1x1xf32>
  %e8 = tensor.empty() : tensor<1x8x4x8xf32>
  %e2 = tensor.empty() : tensor<1x2x4x8xf32>
  %bb = linalg.broadcast ins(%bias : tensor<8xf32>) outs(%e8 : tensor<1x8x4x8xf32>) dimensions = [0, 2, 3]
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %wl : tensor<1x2x4x8xf32>, tensor<8x2x1x1xf32>) outs(%bb : tensor<1x8x4x8xf32>) -> tensor<1x8x4x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : tensor<1x8x4x8xf32>) outs(%e8 : tensor<1x8x4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x4x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%r, %wf : tensor<1x8x4x8xf32>, tensor<2x8x1x1xf32>) outs(%f2 : tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %y : tensor<1x2x4x8xf32>
}

// SiLU reads the lconv output twice (sigmoid and the product): both generics join the group.
// CHECK-LABEL: func.func @lconv_silu_fconv
// CHECK-NOT:     tensor<1x8x4x4xf32>
// CHECK:         scf.forall
// CHECK:           linalg.conv_2d_nchw_fchw {{.*}} -> tensor<1x8x1x4xf32>
// CHECK:           linalg.generic {{.*}} outs(%{{.*}} : tensor<1x8x1x4xf32>)
// CHECK:           linalg.generic {{.*}} outs(%{{.*}} : tensor<1x8x1x4xf32>)
// CHECK:           linalg.conv_2d_nchw_fchw {{.*}} -> tensor<1x2x1x4xf32>
// CHECK:         } {temco.fused = "lconv-act-fconv"}
// REPORT: temco-fuse-activation @lconv_silu_fconv: 1 fused group(s)
// REPORT-NEXT: fused conv_2d_nchw_fchw -> generic -> generic -> fconv
func.func @lconv_silu_fconv(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %wl = arith.constant dense<0.5> : tensor<8x2x1x1xf32>
  %wf = arith.constant dense<0.25> : tensor<2x8x1x1xf32>
  %e8 = tensor.empty() : tensor<1x8x4x4xf32>
  %e2 = tensor.empty() : tensor<1x2x4x4xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %wl : tensor<1x2x4x4xf32>, tensor<8x2x1x1xf32>) outs(%f8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : tensor<1x8x4x4xf32>) outs(%e8 : tensor<1x8x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    %e = math.exp %n : f32
    %d = arith.addf %one, %e : f32
    %q = arith.divf %one, %d : f32
    linalg.yield %q : f32
  } -> tensor<1x8x4x4xf32>
  %m = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a, %s : tensor<1x8x4x4xf32>, tensor<1x8x4x4xf32>) outs(%e8 : tensor<1x8x4x4xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %p = arith.mulf %in, %in2 : f32
    linalg.yield %p : f32
  } -> tensor<1x8x4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%m, %wf : tensor<1x8x4x4xf32>, tensor<2x8x1x1xf32>) outs(%f2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %y : tensor<1x2x4x4xf32>
}

// Pooling between the activation and the fconv (Listing 1, p = 2): the fconv's 1x2x1x2 output tile
// needs a 1x8x2x4 window of the ReLU output, so the lconv computes 2 rows x 4 columns per tile.
// CHECK-LABEL: func.func @lconv_relu_pool_fconv
// CHECK-NOT:     tensor<1x8x4x4xf32>
// CHECK:         scf.forall (%{{.*}}, %{{.*}}, %{{.*}}) in (1, 2, 1)
// CHECK:           linalg.conv_2d_nchw_fchw {{.*}} -> tensor<1x8x2x4xf32>
// CHECK:           linalg.generic {{.*}} outs(%{{.*}} : tensor<1x8x2x4xf32>)
// CHECK:           linalg.pooling_nchw_max {{.*}} -> tensor<1x8x1x2xf32>
// CHECK:           linalg.conv_2d_nchw_fchw {{.*}} -> tensor<1x2x1x2xf32>
// CHECK:         } {temco.fused = "lconv-act-pool-fconv"}
// NOPOOL-LABEL: func.func @lconv_relu_pool_fconv
// NOPOOL-NOT:   scf.forall
// NOPOOL:       return
func.func @lconv_relu_pool_fconv(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant -3.40282347E+38 : f32
  %wl = arith.constant dense<0.5> : tensor<8x2x1x1xf32>
  %wf = arith.constant dense<0.25> : tensor<2x8x1x1xf32>
  %e8 = tensor.empty() : tensor<1x8x4x4xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %wl : tensor<1x2x4x4xf32>, tensor<8x2x1x1xf32>) outs(%f8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : tensor<1x8x4x4xf32>) outs(%e8 : tensor<1x8x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x4x4xf32>
  %window = tensor.empty() : tensor<2x2xf32>
  %ep = tensor.empty() : tensor<1x8x2x2xf32>
  %fp = linalg.fill ins(%ninf : f32) outs(%ep : tensor<1x8x2x2xf32>) -> tensor<1x8x2x2xf32>
  %p = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%r, %window : tensor<1x8x4x4xf32>, tensor<2x2xf32>) outs(%fp : tensor<1x8x2x2xf32>) -> tensor<1x8x2x2xf32>
  %e2 = tensor.empty() : tensor<1x2x2x2xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%p, %wf : tensor<1x8x2x2xf32>, tensor<2x8x1x1xf32>) outs(%f2 : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  return %y : tensor<1x2x2x2xf32>
}

// The ReLU output is also a function result: it is needed full-size, so the fconv is not fused;
// the ReLU is an elementwise root instead: lconv -> ReLU per tile, the lconv output never full-size.
// CHECK-LABEL: func.func @activation_kept
// CHECK:         %[[R:.*]] = scf.forall {{.*}} -> (tensor<1x8x4x4xf32>)
// CHECK:           linalg.conv_2d_nchw_fchw {{.*}} -> tensor<1x8x1x4xf32>
// CHECK:           linalg.generic
// CHECK:         } {temco.fused = "lconv-act"}
// CHECK:         %[[Y:.*]] = linalg.conv_2d_nchw_fchw {{.*}} ins(%[[R]],
// CHECK:         return %[[Y]], %[[R]]
// REPORT: temco-fuse-activation @activation_kept: 1 fused group(s), 0 concat split(s)
// REPORT-NEXT: fused conv_2d_nchw_fchw -> elementwise root at {{.*}}: tile [1, 8, 1, 4]
// REPORT-NEXT: not fused: fconv at {{.*}}: no lconv reaches its input through fusible single-use ops
func.func @activation_kept(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x8x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %wl = arith.constant dense<0.5> : tensor<8x2x1x1xf32>
  %wf = arith.constant dense<0.25> : tensor<2x8x1x1xf32>
  %e8 = tensor.empty() : tensor<1x8x4x4xf32>
  %e2 = tensor.empty() : tensor<1x2x4x4xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %wl : tensor<1x2x4x4xf32>, tensor<8x2x1x1xf32>) outs(%f8 : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : tensor<1x8x4x4xf32>) outs(%e8 : tensor<1x8x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%r, %wf : tensor<1x8x4x4xf32>, tensor<2x8x1x1xf32>) outs(%f2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %y, %r : tensor<1x2x4x4xf32>, tensor<1x8x4x4xf32>
}

// Fig. 9b -> 9c: fconv(concat(relu(lconv_a), relu(lconv_b))) is split into two 1x1 convs with the
// weight's column blocks, the second accumulating into the first; each forms its own fused group.
// CHECK-LABEL: func.func @concat_fconv
// CHECK-NOT:     tensor.concat
// CHECK:         %[[G0:.*]] = scf.forall {{.*}} -> (tensor<1x2x4x4xf32>)
// CHECK:           linalg.conv_2d_nchw_fchw {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x4x1x4xf32>, tensor<2x4x1x1xf32>)
// CHECK:         } {temco.fused = "lconv-act-fconv"}
// CHECK:         scf.forall {{.*}} shared_outs(%{{.*}} = %[[G0]])
// CHECK:           linalg.conv_2d_nchw_fchw {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x6x1x4xf32>, tensor<2x6x1x1xf32>)
// CHECK:         } {temco.fused = "lconv-act-fconv"}
// REPORT: temco-fuse-activation @concat_fconv: 2 fused group(s), 1 concat split(s)
func.func @concat_fconv(%x: tensor<1x2x4x4xf32>, %z: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %wa = arith.constant dense<0.5> : tensor<4x2x1x1xf32>
  %wb = arith.constant dense<0.125> : tensor<6x2x1x1xf32>
  %wf = arith.constant dense<[[[[1.0]], [[2.0]], [[3.0]], [[4.0]], [[5.0]], [[6.0]], [[7.0]], [[8.0]], [[9.0]], [[10.0]]], [[[-1.0]], [[-2.0]], [[-3.0]], [[-4.0]], [[-5.0]], [[-6.0]], [[-7.0]], [[-8.0]], [[-9.0]], [[-10.0]]]]> : tensor<2x10x1x1xf32>
  %e4 = tensor.empty() : tensor<1x4x4x4xf32>
  %e6 = tensor.empty() : tensor<1x6x4x4xf32>
  %e2 = tensor.empty() : tensor<1x2x4x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %wa : tensor<1x2x4x4xf32>, tensor<4x2x1x1xf32>) outs(%f4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %ra = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : tensor<1x4x4x4xf32>) outs(%e4 : tensor<1x4x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x4x4x4xf32>
  %b = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%z, %wb : tensor<1x2x4x4xf32>, tensor<6x2x1x1xf32>) outs(%f6 : tensor<1x6x4x4xf32>) -> tensor<1x6x4x4xf32>
  %rb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%b : tensor<1x6x4x4xf32>) outs(%e6 : tensor<1x6x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x6x4x4xf32>
  %c = tensor.concat dim(1) %ra, %rb : (tensor<1x4x4x4xf32>, tensor<1x6x4x4xf32>) -> tensor<1x10x4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%c, %wf : tensor<1x10x4x4xf32>, tensor<2x10x1x1xf32>) outs(%f2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  return %y : tensor<1x2x4x4xf32>
}

// A DenseNet-BC layer after temco-push-through-concat: the block input's and the new feature's
// BatchNorm/ReLU parts feed the split 1x1 bottleneck convs (Fig. 9c), whose accumulated output goes
// through ReLU to the fconv. The fusion walks through the split convs into their parts' chains (a
// 1x1 conv reads its output tile's pixels only), so the whole layer, the feature's lconv included,
// is one loop; only the block input %x and the reduced tensor %r are read full-size.
// CHECK-LABEL: func.func @dense_layer
// CHECK-NOT:     tensor.concat
// CHECK:         scf.forall
// CHECK-DAG:       linalg.conv_2d_nchw_fchw {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x1x1x4xf32>, tensor<2x1x1x1xf32>)
// CHECK-DAG:       linalg.conv_2d_nchw_fchw {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x2x1x4xf32>, tensor<4x2x1x1xf32>)
// CHECK-DAG:       linalg.conv_2d_nchw_fchw {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x3x1x4xf32>, tensor<4x3x1x1xf32>)
// CHECK-DAG:       linalg.conv_2d_nchw_fchw {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x4x1x4xf32>, tensor<1x4x1x1xf32>)
// CHECK:         } {temco.fused = "lconv-act-fconv"}
// CHECK-NOT:     scf.forall
// CHECK:         return
// REPORT: temco-fuse-activation @dense_layer: 1 fused group(s), 1 concat split(s)
func.func @dense_layer(%x: tensor<1x3x4x4xf32>, %r: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %wl = arith.constant dense<0.5> : tensor<2x1x1x1xf32>
  %mean = arith.constant dense<[0.1, 0.2, 0.3, 0.4, 0.5]> : tensor<5xf32>
  %wb = arith.constant dense<0.25> : tensor<4x5x1x1xf32>
  %wf = arith.constant dense<0.125> : tensor<1x4x1x1xf32>
  %e2 = tensor.empty() : tensor<1x2x4x4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %f = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%r, %wl : tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) outs(%f2 : tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %c = tensor.concat dim(1) %x, %f : (tensor<1x3x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x5x4x4xf32>
  %m = tensor.expand_shape %mean [[0, 1, 2]] output_shape [5, 1, 1] : tensor<5xf32> into tensor<5x1x1xf32>
  %e5 = tensor.empty() : tensor<1x5x4x4xf32>
  %s = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1, d2, d3) -> (d1, 0, 0)>, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c, %m : tensor<1x5x4x4xf32>, tensor<5x1x1xf32>) outs(%e5 : tensor<1x5x4x4xf32>) {
  ^bb0(%in: f32, %p: f32, %out: f32):
    %d = arith.subf %in, %p : f32
    linalg.yield %d : f32
  } -> tensor<1x5x4x4xf32>
  %rc = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x5x4x4xf32>) outs(%e5 : tensor<1x5x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.maximumf %in, %zero : f32
    linalg.yield %v : f32
  } -> tensor<1x5x4x4xf32>
  %e4 = tensor.empty() : tensor<1x4x4x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %b = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%rc, %wb : tensor<1x5x4x4xf32>, tensor<4x5x1x1xf32>) outs(%f4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %rb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%b : tensor<1x4x4x4xf32>) outs(%e4 : tensor<1x4x4x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = arith.maximumf %in, %zero : f32
    linalg.yield %v : f32
  } -> tensor<1x4x4x4xf32>
  %e1 = tensor.empty() : tensor<1x1x4x4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%rb, %wf : tensor<1x4x4x4xf32>, tensor<1x4x1x1xf32>) outs(%f1 : tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %y : tensor<1x1x4x4xf32>
}

// DenseNet's and ResNet-50's stem: lconv -> ReLU -> -inf pad -> 3x3/2 max-pool, whose output is
// needed full-size (returned here; the block input there). The pool roots a group tiled over
// (N, C) with whole feature maps, so the pad fuses with static shapes: per tile, one channel of the
// lconv, the ReLU, the padded channel and its pooling; no 1x4x8x8 or 1x4x10x10 tensor remains.
// CHECK-LABEL: func.func @stem_pool
// CHECK-NOT:     tensor<1x4x8x8xf32>
// CHECK:         scf.forall (%{{.*}}, %{{.*}}) in (1, 4) shared_outs
// CHECK:           linalg.conv_2d_nchw_fchw {{.*}} -> tensor<1x1x8x8xf32>
// CHECK:           linalg.generic {{.*}} ins(%{{.*}} : tensor<1x1x8x8xf32>)
// CHECK:           tensor.pad
// CHECK:           linalg.pooling_nchw_max {{.*}} -> tensor<1x1x4x4xf32>
// CHECK:         } {temco.fused = "lconv-act-pool"}
// CHECK-NOT:     tensor<1x4x10x10xf32>
// REPORT: temco-fuse-activation @stem_pool: 1 fused group(s)
// REPORT-NEXT: fused conv_2d_nchw_fchw -> generic -> tensor.pad -> pooling root at {{.*}}: tile [1, 1, 4, 4]
func.func @stem_pool(%x: tensor<1x2x8x8xf32>) -> tensor<1x4x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %wl = arith.constant dense<0.5> : tensor<4x2x1x1xf32>
  %e = tensor.empty() : tensor<1x4x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %wl : tensor<1x2x8x8xf32>, tensor<4x2x1x1xf32>) outs(%f : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : tensor<1x4x8x8xf32>) outs(%e : tensor<1x4x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x4x8x8xf32>
  %p = tensor.pad %r low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %ninf : f32
  } : tensor<1x4x8x8xf32> to tensor<1x4x10x10xf32>
  %win = tensor.empty() : tensor<3x3xf32>
  %e4 = tensor.empty() : tensor<1x4x4x4xf32>
  %f4 = linalg.fill ins(%ninf : f32) outs(%e4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %y = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%p, %win : tensor<1x4x10x10xf32>, tensor<3x3xf32>) outs(%f4 : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  return %y : tensor<1x4x4x4xf32>
}

// VGG-11's first conv: padded reduced input -> core 3x3 (1 -> 4) -> lconv -> ReLU -> 2x2 max-pool
// -> fconv. The core's output (1x4x32x32) is larger than the pooled group output, so the core
// joins the group and reads 4x10 windows of the padded input per 1x4 tile.
// CHECK-LABEL: func.func @core_pool_fconv
// CHECK-NOT:     tensor<1x4x32x32xf32>
// CHECK:         scf.forall
// CHECK:           tensor.extract_slice %{{.*}} [1, 1, 4, 10] [1, 1, 1, 1] : tensor<1x1x34x34xf32> to tensor<1x1x4x10xf32>
// CHECK:           linalg.conv_2d_nchw_fchw {{.*}} ins(%{{.*}}, %{{.*}} : tensor<1x1x4x10xf32>, tensor<4x1x3x3xf32>)
// CHECK:         } {temco.fused = "lconv-act-pool-fconv"}
func.func @core_pool_fconv(%p: tensor<1x1x34x34xf32>) -> tensor<1x1x16x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %wc = arith.constant dense<0.5> : tensor<4x1x3x3xf32>
  %wl = arith.constant dense<0.25> : tensor<8x4x1x1xf32>
  %wf = arith.constant dense<0.125> : tensor<1x8x1x1xf32>
  %ec = tensor.empty() : tensor<1x4x32x32xf32>
  %fc = linalg.fill ins(%zero : f32) outs(%ec : tensor<1x4x32x32xf32>) -> tensor<1x4x32x32xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%p, %wc : tensor<1x1x34x34xf32>, tensor<4x1x3x3xf32>) outs(%fc : tensor<1x4x32x32xf32>) -> tensor<1x4x32x32xf32>
  %e8 = tensor.empty() : tensor<1x8x32x32xf32>
  %f8 = linalg.fill ins(%zero : f32) outs(%e8 : tensor<1x8x32x32xf32>) -> tensor<1x8x32x32xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%c, %wl : tensor<1x4x32x32xf32>, tensor<8x4x1x1xf32>) outs(%f8 : tensor<1x8x32x32xf32>) -> tensor<1x8x32x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : tensor<1x8x32x32xf32>) outs(%e8 : tensor<1x8x32x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x8x32x32xf32>
  %win = tensor.empty() : tensor<2x2xf32>
  %ep = tensor.empty() : tensor<1x8x16x16xf32>
  %fp = linalg.fill ins(%ninf : f32) outs(%ep : tensor<1x8x16x16xf32>) -> tensor<1x8x16x16xf32>
  %pool = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%r, %win : tensor<1x8x32x32xf32>, tensor<2x2xf32>) outs(%fp : tensor<1x8x16x16xf32>) -> tensor<1x8x16x16xf32>
  %e1 = tensor.empty() : tensor<1x1x16x16xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%pool, %wf : tensor<1x8x16x16xf32>, tensor<1x8x1x1xf32>) outs(%f1 : tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32>
  return %y : tensor<1x1x16x16xf32>
}

// where=peak: the first group (a 64-channel lconv output, 16 KiB full-size) holds the peak unfused
// and is fused; the second (4 channels) stays below the peak that the 32-channel core conv output
// sets anyway (9,120 B as the backend allocates it), so it is left as it was.
// PEAK-LABEL: func.func @peak
// PEAK:         scf.forall
// PEAK:         } {temco.fused = "lconv-act-fconv"}
// PEAK-NOT:     scf.forall
// PEAK:         linalg.conv_2d_nchw_fchw {{.*}} ins(%{{.*}} : tensor<1x2x10x10xf32>, tensor<4x2x1x1xf32>)
// PEAK-NEXT:    linalg.generic
// PEAK:         return
// PEAK-REPORT-LABEL: temco-fuse-activation @peak: 1 fused group(s)
// PEAK-REPORT:   fused conv_2d_nchw_fchw -> generic -> fconv at {{.*}}: tile [1, 2, 1, 8]
// PEAK-REPORT:   not fused: group at {{.*}}: not fused, the peak (9120 B) is elsewhere
// With tile-width=4 the fused group's tiles are widened to whole rows (8 columns): the wider tile
// buffers stay below the peak.
// PEAK-WIDE-LABEL: temco-fuse-activation @peak: 1 fused group(s)
// PEAK-WIDE:   fused conv_2d_nchw_fchw -> generic -> fconv at {{.*}}: tile [1, 2, 1, 8]
func.func @peak(%x: tensor<1x2x8x8xf32>, %w1: tensor<64x2x1x1xf32>, %w2: tensor<2x64x1x1xf32>,
                %w3: tensor<4x2x1x1xf32>, %w4: tensor<2x4x1x1xf32>, %w5: tensor<32x2x3x3xf32>,
                %w6: tensor<2x32x1x1xf32>) -> tensor<1x2x10x10xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e64 = tensor.empty() : tensor<1x64x8x8xf32>
  %f64 = linalg.fill ins(%zero : f32) outs(%e64 : tensor<1x64x8x8xf32>) -> tensor<1x64x8x8xf32>
  %l1 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%x, %w1 : tensor<1x2x8x8xf32>, tensor<64x2x1x1xf32>) outs(%f64 : tensor<1x64x8x8xf32>) -> tensor<1x64x8x8xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%l1 : tensor<1x64x8x8xf32>) outs(%e64 : tensor<1x64x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x64x8x8xf32>
  %e2 = tensor.empty() : tensor<1x2x8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %a = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%r1, %w2 : tensor<1x64x8x8xf32>, tensor<2x64x1x1xf32>) outs(%f2 : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %pa = tensor.pad %a low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x2x8x8xf32> to tensor<1x2x10x10xf32>
  %e32 = tensor.empty() : tensor<1x32x8x8xf32>
  %f32 = linalg.fill ins(%zero : f32) outs(%e32 : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%pa, %w5 : tensor<1x2x10x10xf32>, tensor<32x2x3x3xf32>) outs(%f32 : tensor<1x32x8x8xf32>) -> tensor<1x32x8x8xf32>
  %b = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%c, %w6 : tensor<1x32x8x8xf32>, tensor<2x32x1x1xf32>) outs(%f2 : tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %pb = tensor.pad %b low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x2x8x8xf32> to tensor<1x2x10x10xf32>
  %e4 = tensor.empty() : tensor<1x4x10x10xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<1x4x10x10xf32>) -> tensor<1x4x10x10xf32>
  %l3 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%pb, %w3 : tensor<1x2x10x10xf32>, tensor<4x2x1x1xf32>) outs(%f4 : tensor<1x4x10x10xf32>) -> tensor<1x4x10x10xf32>
  %r3 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%l3 : tensor<1x4x10x10xf32>) outs(%e4 : tensor<1x4x10x10xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x4x10x10xf32>
  %e2b = tensor.empty() : tensor<1x2x10x10xf32>
  %f2b = linalg.fill ins(%zero : f32) outs(%e2b : tensor<1x2x10x10xf32>) -> tensor<1x2x10x10xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%r3, %w4 : tensor<1x4x10x10xf32>, tensor<2x4x1x1xf32>) outs(%f2b : tensor<1x2x10x10xf32>) -> tensor<1x2x10x10xf32>
  return %y : tensor<1x2x10x10xf32>
}

// GPU: error: gpu-sequentialize-forall: expects bufferized IR
// BAD: error: temco-fuse-activation: tile-width must be >= 0, got -1
// BAD-WHERE: error: temco-fuse-activation: where must be one of all, peak, got 'near'
