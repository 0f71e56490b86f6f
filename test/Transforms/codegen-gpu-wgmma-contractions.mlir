// RUN: vt-opt %s --split-input-file --codegen-gpu-wgmma-contractions=chip=sm_90a | filecheck %s
// RUN: vt-opt %s --split-input-file --codegen-gpu-wgmma-contractions=chip=sm_90 | filecheck %s --check-prefix=SM90

// On sm_90a an f16 matmul (the importer's form: f32 sums of widened f16 products, a zero fill of
// the f32 accumulator before, a cast to f16 after) becomes one launch of the wgmma kernel: the fill
// goes (the accumulators start at zero), the cast is computed in its registers and stored to the
// f16 output, and the f32 buffer goes. The launch says which kernel (codegen.launch_plan).

// CHECK:       gpu.module @[[MOD:wgmma_1_module]]
// CHECK:         gpu.func @[[FN:wgmma_1]](%{{.*}}: memref<256x64xf16>, %{{.*}}: memref<64x128xf16>, %{{.*}}: memref<256x128xf16>) workgroup(%{{.*}} : memref<24576xf16, #gpu.address_space<workgroup>> {llvm.align = 128 : i64}) kernel
// One cp.async group per k step (the prologue's two tiles, then one per step, empty past the
// last tile), so waiting until one group is pending means this step's tile has landed.
// CHECK:           nvgpu.device_async_copy {{.*}} {bypassL1}
// CHECK:           nvvm.cp.async.commit.group
// CHECK:           nvvm.cp.async.commit.group
// CHECK:           scf.for
// CHECK-NEXT:        nvvm.cp.async.wait.group 1
// CHECK-NEXT:        nvvm.fence.proxy
// CHECK:             nvvm.wgmma.fence.aligned
// CHECK:             nvvm.wgmma.mma_async
// CHECK-SAME:          <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
// CHECK:             nvvm.wgmma.commit.group.sync.aligned
// CHECK:             nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:             scf.if
// CHECK:             nvvm.cp.async.commit.group
// CHECK-NEXT:        scf.yield
// CHECK:           arith.truncf {{.*}} : f32 to f16
// CHECK-LABEL: func.func @matmul
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     memref.alloc
// CHECK:         gpu.launch_func @[[MOD]]::@[[FN]] blocks in ({{.*}}) threads in ({{.*}}) args(%arg0 : memref<256x64xf16>, %arg1 : memref<64x128xf16>, %arg2 : memref<256x128xf16>)
// CHECK-SAME:    codegen.launch_plan = {{{.*}}description = "contraction 256x128x64", detail = "wgmma m64n128k16 (f16), one warpgroup per 128x128 tile, k tiles of 32 in 3 cp.async stages, A K-major, B N-major, zero fill dropped, epilogue in registers"{{.*}}schedule = "wgmma"

// SM90-LABEL: func.func @matmul
// SM90-NOT:     gpu.launch_func
// SM90:         linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @matmul(%a: memref<256x64xf16>, %b: memref<64x128xf16>, %out: memref<256x128xf16>) {
  %zero = arith.constant 0.0 : f32
  %acc = memref.alloc() {alignment = 64 : i64} : memref<256x128xf32>
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%acc : memref<256x128xf32>) {
  ^bb0(%o: f32):
    linalg.yield %zero : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<256x64xf16>, memref<64x128xf16>) outs(%acc : memref<256x128xf32>) {
  ^bb0(%x: f16, %y: f16, %o: f32):
    %0 = arith.extf %x : f16 to f32
    %1 = arith.extf %y : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %o, %2 : f32
    linalg.yield %3 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%acc : memref<256x128xf32>) outs(%out : memref<256x128xf16>) {
  ^bb0(%x: f32, %o: f16):
    %0 = arith.truncf %x : f32 to f16
    linalg.yield %0 : f16
  }
  memref.dealloc %acc : memref<256x128xf32>
  return
}

// -----

// Fewer than 128 rows either way: the contraction keeps its generic (the mma-sync schedule's).
// CHECK-LABEL: func.func @small
// CHECK-NOT:     gpu.launch_func
// CHECK:         linalg.generic
func.func @small(%a: memref<64x64xf16>, %b: memref<64x64xf16>, %acc: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%a, %b : memref<64x64xf16>, memref<64x64xf16>) outs(%acc : memref<64x64xf32>) {
  ^bb0(%x: f16, %y: f16, %o: f32):
    %0 = arith.extf %x : f16 to f32
    %1 = arith.extf %y : f16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.addf %o, %2 : f32
    linalg.yield %3 : f32
  }
  return
}
