// RUN: vt-opt %s --subbyte-pack | filecheck %s
// RUN: vt-opt %s --subbyte-pack="tile-layout='local(2, 1).spatial(4, 2)'" | filecheck %s --check-prefix=TILED
// RUN: not vt-opt %s --subbyte-pack="tile-layout='local(16, 2)'" 2>&1 | filecheck %s --check-prefix=ERR

// A quantize(nn.Linear(8, 2, bias=False), dtype="i3", group_size=4) as vtmlir.import_torch writes it:
// 16 3-bit codes in 6 packed bytes, unpacked by ~40 elementwise generics, sign-extended, scaled per
// group of 4, transposed. subbyte-pack evaluates it and keeps: 6 bytes + 1 slack byte (3-bit codes
// span bytes), the sub-byte tensor view, one dequantisation generic with [N, K/G] scales.

// CHECK-LABEL: func.func @dense_weight
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<1x8xf32>, tensor<8x2xf32>)

// CHECK-LABEL: func.func @main
// CHECK:         %[[P:.*]] = arith.constant dense<{{.*}}> : tensor<7xi8>
// CHECK:         %[[C:.*]] = "lowbit.unpack"(%[[P]]) {dtype = "i3", position = #[[POS:.*]], tile_layout = ""} : (tensor<7xi8>) -> tensor<8x2xi3>
// CHECK:         %[[S:.*]] = arith.constant dense<{{.*}}> : tensor<2x2xf32>
// CHECK:         %[[W:.*]] = linalg.generic {{.*}} ins(%[[C]], %[[S]] : tensor<8x2xi3>, tensor<2x2xf32>) {{.*}} attrs = {lowbit.dequantize = "i3"}
// CHECK:           arith.sitofp %{{.*}} {lowbit.value} : i3 to f32
// CHECK:           arith.mulf
// CHECK:         linalg.matmul ins(%{{.*}}, %[[W]] : tensor<1x8xf32>, tensor<8x2xf32>)
// CHECK-NOT:     tensor.concat
// CHECK-NOT:     linalg.transpose

// TILED:         "lowbit.unpack"(%{{.*}}) {dtype = "i3", position = #{{.*}}, tile_layout = "local(2, 1).spatial(4, 2)"}

// ERR: error: subbyte-pack: the 8x2 weight is not a whole number of 16x2 tiles

#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0) -> (d0)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map3 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
func.func @dense_weight(%x: tensor<1x8xf32>) -> tensor<1x2xf32> {
  %w = arith.constant dense<0.5> : tensor<8x2xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2xf32>) -> tensor<1x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<1x8xf32>, tensor<8x2xf32>) outs(%acc : tensor<1x2xf32>) -> tensor<1x2xf32>
  return %y : tensor<1x2xf32>
}

func.func @main(%arg0: tensor<1x8xf32>) -> tensor<1x2xf32> {
  %cst = arith.constant 0.000000e+00 : f32
  %cst_0 = arith.constant dense_resource<torch_tensor_2_2_torch.float32> : tensor<2x2xf32>
  %c7_i32 = arith.constant 7 : i32
  %c3_i32 = arith.constant 3 : i32
  %c8_i32 = arith.constant 8 : i32
  %c6_i32 = arith.constant 6 : i32
  %c1_i32 = arith.constant 1 : i32
  %c4_i32 = arith.constant 4 : i32
  %c2_i32 = arith.constant 2 : i32
  %c5_i32 = arith.constant 5 : i32
  %cst_1 = arith.constant dense_resource<torch_tensor_6_torch.uint8> : tensor<6xi8>
  %expanded = tensor.expand_shape %cst_1 [[0, 1]] output_shape [2, 3] : tensor<6xi8> into tensor<2x3xi8>
  %0 = tensor.empty() : tensor<2x3xi32>
  %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%expanded : tensor<2x3xi8>) outs(%0 : tensor<2x3xi32>) {
  ^bb0(%in: i8, %out: i32):
    %34 = arith.extui %in : i8 to i32
    linalg.yield %34 : i32
  } -> tensor<2x3xi32>
  %extracted_slice = tensor.extract_slice %1[0, 0] [2, 1] [1, 1] : tensor<2x3xi32> to tensor<2x1xi32>
  %collapsed = tensor.collapse_shape %extracted_slice [[0, 1]] : tensor<2x1xi32> into tensor<2xi32>
  %2 = tensor.empty() : tensor<2xi32>
  %3 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%collapsed : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.andi %in, %c7_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %4 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%collapsed : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shrsi %in, %c3_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %5 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%4 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.andi %in, %c7_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %extracted_slice_2 = tensor.extract_slice %1[0, 1] [2, 1] [1, 1] : tensor<2x3xi32> to tensor<2x1xi32>
  %collapsed_3 = tensor.collapse_shape %extracted_slice_2 [[0, 1]] : tensor<2x1xi32> into tensor<2xi32>
  %6 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%collapsed_3 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shli %in, %c8_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %7 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel"]} ins(%collapsed, %6 : tensor<2xi32>, tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %in_17: i32, %out: i32):
    %34 = arith.ori %in, %in_17 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %8 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%7 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shrsi %in, %c6_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %9 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%8 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.andi %in, %c7_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %10 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%collapsed_3 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shrsi %in, %c1_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %11 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%10 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.andi %in, %c7_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %12 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%collapsed_3 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shrsi %in, %c4_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %13 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%12 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.andi %in, %c7_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %extracted_slice_4 = tensor.extract_slice %1[0, 2] [2, 1] [1, 1] : tensor<2x3xi32> to tensor<2x1xi32>
  %collapsed_5 = tensor.collapse_shape %extracted_slice_4 [[0, 1]] : tensor<2x1xi32> into tensor<2xi32>
  %14 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%collapsed_5 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shli %in, %c8_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %15 = linalg.generic {indexing_maps = [#map1, #map1, #map1], iterator_types = ["parallel"]} ins(%collapsed_3, %14 : tensor<2xi32>, tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %in_17: i32, %out: i32):
    %34 = arith.ori %in, %in_17 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %16 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%15 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shrsi %in, %c7_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %17 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%16 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.andi %in, %c7_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %18 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%collapsed_5 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shrsi %in, %c2_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %19 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%18 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.andi %in, %c7_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %20 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%collapsed_5 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shrsi %in, %c5_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %21 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel"]} ins(%20 : tensor<2xi32>) outs(%2 : tensor<2xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.andi %in, %c7_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2xi32>
  %expanded_6 = tensor.expand_shape %3 [[0, 1]] output_shape [2, 1] : tensor<2xi32> into tensor<2x1xi32>
  %expanded_7 = tensor.expand_shape %5 [[0, 1]] output_shape [2, 1] : tensor<2xi32> into tensor<2x1xi32>
  %expanded_8 = tensor.expand_shape %9 [[0, 1]] output_shape [2, 1] : tensor<2xi32> into tensor<2x1xi32>
  %expanded_9 = tensor.expand_shape %11 [[0, 1]] output_shape [2, 1] : tensor<2xi32> into tensor<2x1xi32>
  %expanded_10 = tensor.expand_shape %13 [[0, 1]] output_shape [2, 1] : tensor<2xi32> into tensor<2x1xi32>
  %expanded_11 = tensor.expand_shape %17 [[0, 1]] output_shape [2, 1] : tensor<2xi32> into tensor<2x1xi32>
  %expanded_12 = tensor.expand_shape %19 [[0, 1]] output_shape [2, 1] : tensor<2xi32> into tensor<2x1xi32>
  %expanded_13 = tensor.expand_shape %21 [[0, 1]] output_shape [2, 1] : tensor<2xi32> into tensor<2x1xi32>
  %concat = tensor.concat dim(1) %expanded_6, %expanded_7, %expanded_8, %expanded_9, %expanded_10, %expanded_11, %expanded_12, %expanded_13 : (tensor<2x1xi32>, tensor<2x1xi32>, tensor<2x1xi32>, tensor<2x1xi32>, tensor<2x1xi32>, tensor<2x1xi32>, tensor<2x1xi32>, tensor<2x1xi32>) -> tensor<2x8xi32>
  %22 = tensor.empty() : tensor<2x8xi32>
  %23 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%concat : tensor<2x8xi32>) outs(%22 : tensor<2x8xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shrsi %in, %c2_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2x8xi32>
  %24 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%23 : tensor<2x8xi32>) outs(%22 : tensor<2x8xi32>) {
  ^bb0(%in: i32, %out: i32):
    %34 = arith.shli %in, %c3_i32 : i32
    linalg.yield %34 : i32
  } -> tensor<2x8xi32>
  %25 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]} ins(%concat, %24 : tensor<2x8xi32>, tensor<2x8xi32>) outs(%22 : tensor<2x8xi32>) {
  ^bb0(%in: i32, %in_17: i32, %out: i32):
    %34 = arith.subi %in, %in_17 : i32
    linalg.yield %34 : i32
  } -> tensor<2x8xi32>
  %26 = tensor.empty() : tensor<2x8xf32>
  %27 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%25 : tensor<2x8xi32>) outs(%26 : tensor<2x8xf32>) {
  ^bb0(%in: i32, %out: f32):
    %34 = arith.sitofp %in : i32 to f32
    linalg.yield %34 : f32
  } -> tensor<2x8xf32>
  %expanded_14 = tensor.expand_shape %27 [[0], [1, 2]] output_shape [2, 2, 4] : tensor<2x8xf32> into tensor<2x2x4xf32>
  %expanded_15 = tensor.expand_shape %cst_0 [[0], [1, 2]] output_shape [2, 2, 1] : tensor<2x2xf32> into tensor<2x2x1xf32>
  %28 = tensor.empty() : tensor<2x2x4xf32>
  %29 = linalg.generic {indexing_maps = [#map2, #map3, #map2], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_14, %expanded_15 : tensor<2x2x4xf32>, tensor<2x2x1xf32>) outs(%28 : tensor<2x2x4xf32>) {
  ^bb0(%in: f32, %in_17: f32, %out: f32):
    %34 = arith.mulf %in, %in_17 : f32
    linalg.yield %34 : f32
  } -> tensor<2x2x4xf32>
  %collapsed_16 = tensor.collapse_shape %29 [[0], [1, 2]] : tensor<2x2x4xf32> into tensor<2x8xf32>
  %30 = tensor.empty() : tensor<8x2xf32>
  %transposed = linalg.transpose ins(%collapsed_16 : tensor<2x8xf32>) outs(%30 : tensor<8x2xf32>) permutation = [1, 0] 
  %31 = tensor.empty() : tensor<1x2xf32>
  %32 = linalg.fill ins(%cst : f32) outs(%31 : tensor<1x2xf32>) -> tensor<1x2xf32>
  %33 = linalg.matmul ins(%arg0, %transposed : tensor<1x8xf32>, tensor<8x2xf32>) outs(%32 : tensor<1x2xf32>) -> tensor<1x2xf32>
  return %33 : tensor<1x2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      torch_tensor_2_2_torch.float32: "0x0400000041A6C63D005FBF3D3EE2113D0395E63D",
      torch_tensor_6_torch.uint8: "0x0100000050FB605F5D1F"
    }
  }
#-}

