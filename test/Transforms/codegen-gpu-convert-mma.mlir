// RUN: vt-opt %s --codegen-gpu-convert-mma | filecheck %s

// The 16x8x16 vector.contract of a tensor-core kernel becomes ldmatrix + mma.sync (upstream
// convert-vector-to-gpu{use-nvgpu=true}); a gpu.module without vector.contract is not given to it
// (it fails on the scalar f16 arithmetic of naive kernels: "unhandled vector to mma type").
// CHECK-LABEL: gpu.module @tensor_cores
// CHECK:         %[[A:.*]] = nvgpu.ldmatrix %{{.*}} {numTiles = 4 : i32, transpose = false} : {{.*}} -> vector<4x2xf16>
// CHECK:         vector.load %arg0{{.*}} : memref<16x16xf32>, vector<2xf32>
// CHECK:         %[[B:.*]] = nvgpu.ldmatrix %{{.*}} {numTiles = 2 : i32, transpose = true} : {{.*}} -> vector<2x2xf16>
// CHECK:         nvgpu.mma.sync(%[[A]], %[[B]], %{{.*}}) {mmaShape = [16, 8, 16]}
// CHECK:         vector.store %{{.*}}, %arg0{{.*}} : memref<16x16xf32>, vector<2xf32>
// CHECK-NOT:     vector.contract
// CHECK-LABEL: gpu.module @scalar_half
// CHECK:         arith.addf %{{.*}}, %{{.*}} : f16
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
module attributes {gpu.container_module} {
  gpu.module @tensor_cores {
    gpu.func @warp_tile(%acc: memref<16x16xf32>) kernel attributes {codegen.kernel = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c8 = arith.constant 8 : index
      %pf16 = ub.poison : f16
      %pf32 = ub.poison : f32
      %sa = memref.alloc() : memref<16x24xf16, #gpu.address_space<workgroup>>
      %sb = memref.alloc() : memref<16x24xf16, #gpu.address_space<workgroup>>
      %x = vector.transfer_read %sa[%c0, %c0], %pf16 {in_bounds = [true, true]} : memref<16x24xf16, #gpu.address_space<workgroup>>, vector<16x16xf16>
      %w = vector.transfer_read %sb[%c0, %c8], %pf16 {in_bounds = [true, true]} : memref<16x24xf16, #gpu.address_space<workgroup>>, vector<16x8xf16>
      %y = vector.transfer_read %acc[%c0, %c8], %pf32 {in_bounds = [true, true]} : memref<16x16xf32>, vector<16x8xf32>
      %r = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %x, %w, %y : vector<16x16xf16>, vector<16x8xf16> into vector<16x8xf32>
      vector.transfer_write %r, %acc[%c0, %c8] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x16xf32>
      gpu.return
    }
  }
  gpu.module @scalar_half {
    gpu.func @naive(%x: memref<16xf16>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<16xf16>
      %d = arith.addf %v, %v : f16
      memref.store %d, %x[%i] : memref<16xf16>
      gpu.return
    }
  }
}
