// RUN: vt-opt %s --codegen-gpu-convert-mma | filecheck %s
// RUN: vt-opt %s --codegen-gpu-convert-mma | filecheck %s --check-prefix=BF16-ONLY

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

// bf16 x bf16 -> f32: the conversion has f16 fragments only; the kernel's bf16 payload goes through
// it as f16 and comes back bf16 (the same fragments: ldmatrix of 16-bit elements, mma.sync
// m16n8k16). The epilogue's truncf keeps its bf16 result (a bitcast stood between it and the retyped
// store, folded away), and a bf16 constant copied into shared memory keeps its value; no f16 is left.
// CHECK-LABEL: gpu.module @tensor_cores_bf16
// CHECK-SAME:    {
// CHECK:         gpu.func @warp_tile_bf16(%{{.*}}: memref<16x16xf32>, %{{.*}}: memref<16x16xbf16>, %{{.*}}: memref<16x16xbf16>)
// CHECK-DAG:     %[[ONE:.*]] = arith.constant dense<1.000000e+00> : vector<8xbf16>
// CHECK-DAG:     %[[SA:.*]] = memref.alloc() : memref<16x24xbf16, #gpu.address_space<workgroup>>
// CHECK-DAG:     %[[SB:.*]] = memref.alloc() : memref<16x24xbf16, #gpu.address_space<workgroup>>
// CHECK:         vector.transfer_write %[[ONE]], %[[SB]]
// CHECK:         %[[A:.*]] = nvgpu.ldmatrix %[[SA]]{{.*}} {numTiles = 4 : i32, transpose = false} : {{.*}} -> vector<4x2xbf16>
// CHECK:         %[[B:.*]] = nvgpu.ldmatrix %[[SB]]{{.*}} {numTiles = 2 : i32, transpose = true} : {{.*}} -> vector<2x2xbf16>
// CHECK:         nvgpu.mma.sync(%[[A]], %[[B]], %{{.*}}) {mmaShape = [16, 8, 16]} : (vector<4x2xbf16>, vector<2x2xbf16>, vector<2x2xf32>) -> vector<2x2xf32>
// CHECK:         %[[T:.*]] = arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK-NEXT:    vector.transfer_write %[[T]], %{{.*}} : vector<8xbf16>, memref<16x16xbf16>
// No f16 type, bitcast or vector.contract is left anywhere in that module (the last one):
// BF16-ONLY-LABEL: gpu.module @tensor_cores_bf16
// BF16-ONLY-NOT:   {{[^b]f16|arith.bitcast|vector.contract}}
// BF16-ONLY:       gpu.return
// BF16-ONLY-NOT:   {{[^b]f16|arith.bitcast|vector.contract}}
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
  gpu.module @tensor_cores_bf16 {
    gpu.func @warp_tile_bf16(%acc: memref<16x16xf32>, %x: memref<16x16xbf16>, %out: memref<16x16xbf16>) kernel attributes {codegen.kernel = 2 : i64} {
      %c0 = arith.constant 0 : index
      %c8 = arith.constant 8 : index
      %pbf16 = ub.poison : bf16
      %pf32 = ub.poison : f32
      %one = arith.constant dense<1.0> : vector<8xbf16>
      %sa = memref.alloc() : memref<16x24xbf16, #gpu.address_space<workgroup>>
      %sb = memref.alloc() : memref<16x24xbf16, #gpu.address_space<workgroup>>
      %g = vector.transfer_read %x[%c0, %c0], %pbf16 {in_bounds = [true]} : memref<16x16xbf16>, vector<8xbf16>
      vector.transfer_write %g, %sa[%c0, %c0] {in_bounds = [true]} : vector<8xbf16>, memref<16x24xbf16, #gpu.address_space<workgroup>>
      vector.transfer_write %one, %sb[%c0, %c0] {in_bounds = [true]} : vector<8xbf16>, memref<16x24xbf16, #gpu.address_space<workgroup>>
      gpu.barrier
      %a = vector.transfer_read %sa[%c0, %c0], %pbf16 {in_bounds = [true, true]} : memref<16x24xbf16, #gpu.address_space<workgroup>>, vector<16x16xbf16>
      %w = vector.transfer_read %sb[%c0, %c8], %pbf16 {in_bounds = [true, true]} : memref<16x24xbf16, #gpu.address_space<workgroup>>, vector<16x8xbf16>
      %y = vector.transfer_read %acc[%c0, %c8], %pf32 {in_bounds = [true, true]} : memref<16x16xf32>, vector<16x8xf32>
      %r = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %a, %w, %y : vector<16x16xbf16>, vector<16x8xbf16> into vector<16x8xf32>
      vector.transfer_write %r, %acc[%c0, %c8] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x16xf32>
      gpu.barrier
      %e = vector.transfer_read %acc[%c0, %c0], %pf32 {in_bounds = [true]} : memref<16x16xf32>, vector<8xf32>
      %t = arith.truncf %e : vector<8xf32> to vector<8xbf16>
      vector.transfer_write %t, %out[%c0, %c0] {in_bounds = [true]} : vector<8xbf16>, memref<16x16xbf16>
      gpu.return
    }
  }
}
