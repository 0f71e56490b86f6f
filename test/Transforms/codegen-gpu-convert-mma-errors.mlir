// RUN: not vt-opt %s --codegen-gpu-convert-mma -o /dev/null 2>&1 | filecheck %s

// A bf16 tensor-core kernel goes through the conversion as f16 payload (retype_payload.py): one that
// holds f16 values already cannot be renamed and back without mixing them up. It is refused, named by
// its kernel id (the CUDA lowering then compiles that kernel again with the naive mapping).
// CHECK: error: kernel 3: codegen-gpu-convert-mma: bf16 as f16 payload: the kernel holds f16 values already
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
module attributes {gpu.container_module} {
  gpu.module @mixed {
    gpu.func @warp_tile(%acc: memref<16x16xf32>, %h: memref<16xf16>) kernel attributes {codegen.kernel = 3 : i64} {
      %c0 = arith.constant 0 : index
      %c8 = arith.constant 8 : index
      %pbf16 = ub.poison : bf16
      %pf32 = ub.poison : f32
      %sa = memref.alloc() : memref<16x24xbf16, #gpu.address_space<workgroup>>
      %sb = memref.alloc() : memref<16x24xbf16, #gpu.address_space<workgroup>>
      %a = vector.transfer_read %sa[%c0, %c0], %pbf16 {in_bounds = [true, true]} : memref<16x24xbf16, #gpu.address_space<workgroup>>, vector<16x16xbf16>
      %w = vector.transfer_read %sb[%c0, %c8], %pbf16 {in_bounds = [true, true]} : memref<16x24xbf16, #gpu.address_space<workgroup>>, vector<16x8xbf16>
      %y = vector.transfer_read %acc[%c0, %c8], %pf32 {in_bounds = [true, true]} : memref<16x16xf32>, vector<16x8xf32>
      %r = vector.contract {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %a, %w, %y : vector<16x16xbf16>, vector<16x8xbf16> into vector<16x8xf32>
      vector.transfer_write %r, %acc[%c0, %c8] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x16xf32>
      gpu.return
    }
  }
}
