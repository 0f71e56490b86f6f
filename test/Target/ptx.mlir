// Every kernel becomes PTX for the requested chip, with its launch configuration; the host program
// launches them in order.
// RUN: vtmlir compile %s --target cuda | filecheck %s
// RUN: vtmlir compile %s --target cuda --chip sm_90 | filecheck %s --check-prefix=SM90
// RUN: vtmlir compile %s --target cuda --emit host | filecheck %s --check-prefix=HOST
// RUN: not vtmlir compile %s --target cuda --chip sm_12 2>&1 | filecheck %s --check-prefix=CHIP

// The fill and the exp fused into the row sum: one kernel (a warp per row: 4 rows in one block of
// 32x4 threads, a shuffle butterfly; the fill a member of the row group), writing the result
// buffer itself (no copy to it: the result's buffer is the out-parameter).
// CHECK:      // kernel main_kernel: grid (1, 1, 1), block (32, 4, 1)
// CHECK:      .target sm_80
// CHECK:      .entry main_kernel(
// CHECK:      ex2.approx
// CHECK:      shfl.sync.bfly
// CHECK-NOT:  // kernel main_kernel_1
// CHECK-NOT:  .extern

// SM90: .target sm_90

// HOST:      host program @main: inputs ['b0'], outputs ['b1']
// HOST-NEXT:   launch main_kernel grid=(1, 1, 1) block=(32, 4, 1) (b1[+0], b0[+0])
// HOST-NOT:    launch

// CHIP: error: unsupported CUDA chip 'sm_12'

func.func @main(%x: tensor<4x32xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x32xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x32xf32>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<4x32xf32>
  %acc0 = tensor.empty() : tensor<4xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%acc0 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<4x32xf32>) outs(%acc : tensor<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %sum : tensor<4xf32>
}
