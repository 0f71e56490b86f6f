// RUN: vt-opt %s --split-input-file --subbyte-cuda-kernels | filecheck %s

// Each quantised contraction (a linalg.generic marked lowbit.fused, as subbyte-lower leaves it,
// bufferized) becomes a launch of a Tilus kernel: its own gpu.module, the codes re-packed in the
// kernel's Fig. 8 order into a new constant global, f32 scales and zero points per group; the old
// constants go. The launch says which kernel and why (codegen.launch_plan).

// f32 activations: the FMA kernel reads them as f32 (the mma rule also refuses group 8).
// CHECK-DAG:   memref.global "private" constant @[[CODES:tilus_fma_u4_0_codes]] : memref<72xi8>
// CHECK-DAG:   memref.global "private" constant @[[SCALES:tilus_fma_u4_0_scales]] : memref<8x2xf32>
// CHECK-DAG:   memref.global "private" constant @[[ZEROS:tilus_fma_u4_0_zeros]] : memref<8x2xf32>
// CHECK-NOT:   @fma_f32_codes
// CHECK:       gpu.module @[[MOD:tilus_fma_u4_0_module]]
// CHECK:         gpu.func @[[FN:tilus_fma_u4_0]](%{{.*}}: memref<2x16xf32>, %{{.*}}: memref<72xi8>, %{{.*}}: memref<8x2xf32>, %{{.*}}: memref<8x2xf32>, %{{.*}}: memref<2x8xf32>) kernel
// CHECK:           vector.load %{{.*}} {alignment = 1 : i64} : memref<72xi8>, vector<8xi8>
// CHECK:           vector.load %{{.*}} : memref<2x16xf32>, vector<4xf32>
// CHECK:           llvm.intr.fma
// CHECK-LABEL: func.func @fma_f32
// CHECK-NOT:     linalg.generic
// CHECK:         %[[C:.*]] = memref.get_global @[[CODES]]
// CHECK:         %[[S:.*]] = memref.get_global @[[SCALES]]
// CHECK:         %[[Z:.*]] = memref.get_global @[[ZEROS]]
// CHECK:         gpu.launch_func @[[MOD]]::@[[FN]] blocks in ({{.*}}) threads in ({{.*}}) args(%arg0 : memref<2x16xf32>, %[[C]] : memref<72xi8>, %[[S]] : memref<8x2xf32>, %[[Z]] : memref<8x2xf32>, %arg1 : memref<2x8xf32>)
// CHECK-SAME:    codegen.launch_plan = {{{.*}}description = "quantised contraction 2x8x16 (u4, group 8)", detail = "f32 FMA, 8 threads x 2 rows per block; mma: group size 8 is not a multiple of 16 (the mma k step)"{{.*}}schedule = "tilus-fma"

memref.global "private" constant @fma_f32_codes : memref<64xi8> = dense<33> {alignment = 64 : i64}
memref.global "private" constant @fma_f32_scales : memref<8x2xf32> = dense<[[5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01]]> {alignment = 64 : i64}
memref.global "private" constant @fma_f32_zeros : memref<8x2xf32> = dense<8.0> {alignment = 64 : i64}
func.func @fma_f32(%x: memref<2x16xf32>, %y: memref<2x8xf32>) {
  %c15_i32 = arith.constant 15 : i32
  %codes = memref.get_global @fma_f32_codes : memref<64xi8>
  %scales = memref.get_global @fma_f32_scales : memref<8x2xf32>
  %zeros = memref.get_global @fma_f32_zeros : memref<8x2xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                   affine_map<(d0, d1, d2) -> (((d1 * 16 + d2) * 4) floordiv 8)>,
                                   affine_map<(d0, d1, d2) -> (d1, d2 floordiv 8)>, affine_map<(d0, d1, d2) -> (d1, d2 floordiv 8)>,
                                   affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %codes, %scales, %zeros : memref<2x16xf32>, memref<64xi8>, memref<8x2xf32>, memref<8x2xf32>)
      outs(%y : memref<2x8xf32>) attrs = {lowbit.fused = "u4"} {
  ^bb0(%in: f32, %byte: i8, %s: f32, %z: f32, %out: f32):
    
    %i1 = linalg.index 1 : index
    %i2 = linalg.index 2 : index
    %sh = affine.apply affine_map<(d1, d2) -> (((d1 * 16 + d2) * 4) mod 8)>(%i1, %i2)
    %shift = arith.index_cast %sh : index to i32
    %wide = arith.extui %byte : i8 to i32
    %moved = arith.shrui %wide, %shift : i32
    %code = arith.andi %moved, %c15_i32 : i32
    %v = arith.uitofp %code : i32 to f32
    %vz = arith.subf %v, %z : f32
    %w = arith.mulf %vz, %s : f32
    %p = arith.mulf %in, %w : f32
    %sum = arith.addf %out, %p : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// f16 activations, group 16, M % 16 = 0: the mma rule holds; the B tiles are staged in shared memory.
// CHECK:       gpu.module @[[MOD:tilus_mma_u4_0_module]]
// CHECK:         gpu.func @[[FN:tilus_mma_u4_0]](%{{.*}}: memref<16x16xf16>, {{.*}}) workgroup(%{{.*}} : memref<72xi8, #gpu.address_space<workgroup>>) kernel
// CHECK:           gpu.barrier
// CHECK:           gpu.barrier
// CHECK:           nvvm.mma.sync
// CHECK-LABEL: func.func @mma_f16
// CHECK-NOT:     linalg.generic
// CHECK:         gpu.launch_func @[[MOD]]::@[[FN]]
// CHECK-SAME:    schedule = "tilus-mma"

memref.global "private" constant @mma_f16_codes : memref<64xi8> = dense<33> {alignment = 64 : i64}
memref.global "private" constant @mma_f16_scales : memref<8x1xf32> = dense<[[5.000e-01], [5.000e-01], [5.000e-01], [5.000e-01], [5.000e-01], [5.000e-01], [5.000e-01], [5.000e-01]]> {alignment = 64 : i64}
memref.global "private" constant @mma_f16_zeros : memref<8x1xf32> = dense<8.0> {alignment = 64 : i64}
func.func @mma_f16(%x: memref<16x16xf16>, %y: memref<16x8xf32>) {
  %c15_i32 = arith.constant 15 : i32
  %codes = memref.get_global @mma_f16_codes : memref<64xi8>
  %scales = memref.get_global @mma_f16_scales : memref<8x1xf32>
  %zeros = memref.get_global @mma_f16_zeros : memref<8x1xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                   affine_map<(d0, d1, d2) -> (((d1 * 16 + d2) * 4) floordiv 8)>,
                                   affine_map<(d0, d1, d2) -> (d1, d2 floordiv 16)>, affine_map<(d0, d1, d2) -> (d1, d2 floordiv 16)>,
                                   affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %codes, %scales, %zeros : memref<16x16xf16>, memref<64xi8>, memref<8x1xf32>, memref<8x1xf32>)
      outs(%y : memref<16x8xf32>) attrs = {lowbit.fused = "u4"} {
  ^bb0(%in: f16, %byte: i8, %s: f32, %z: f32, %out: f32):
    %xf = arith.extf %in : f16 to f32
    %i1 = linalg.index 1 : index
    %i2 = linalg.index 2 : index
    %sh = affine.apply affine_map<(d1, d2) -> (((d1 * 16 + d2) * 4) mod 8)>(%i1, %i2)
    %shift = arith.index_cast %sh : index to i32
    %wide = arith.extui %byte : i8 to i32
    %moved = arith.shrui %wide, %shift : i32
    %code = arith.andi %moved, %c15_i32 : i32
    %v = arith.uitofp %code : i32 to f32
    %vz = arith.subf %v, %z : f32
    %w = arith.mulf %vz, %s : f32
    %p = arith.mulf %xf, %w : f32
    %sum = arith.addf %out, %p : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// K = 6: mma needs K % 16, the FMA kernel K % 4; the generic stays (naive mapping) and says why.
// CHECK-LABEL: func.func @refused
// CHECK:         linalg.generic
// CHECK-SAME:    codegen.tilus_refusal = "mma: group size 6 is not a multiple of 16 (the mma k step); FMA: needs K % 4 == 0, K = 6"
// CHECK-NOT:   gpu.launch_func

memref.global "private" constant @refused_codes : memref<24xi8> = dense<33> {alignment = 64 : i64}
memref.global "private" constant @refused_scales : memref<8x1xf32> = dense<[[5.000e-01], [5.000e-01], [5.000e-01], [5.000e-01], [5.000e-01], [5.000e-01], [5.000e-01], [5.000e-01]]> {alignment = 64 : i64}
memref.global "private" constant @refused_zeros : memref<8x1xf32> = dense<8.0> {alignment = 64 : i64}
func.func @refused(%x: memref<2x6xf32>, %y: memref<2x8xf32>) {
  %c15_i32 = arith.constant 15 : i32
  %codes = memref.get_global @refused_codes : memref<24xi8>
  %scales = memref.get_global @refused_scales : memref<8x1xf32>
  %zeros = memref.get_global @refused_zeros : memref<8x1xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                   affine_map<(d0, d1, d2) -> (((d1 * 6 + d2) * 4) floordiv 8)>,
                                   affine_map<(d0, d1, d2) -> (d1, d2 floordiv 6)>, affine_map<(d0, d1, d2) -> (d1, d2 floordiv 6)>,
                                   affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %codes, %scales, %zeros : memref<2x6xf32>, memref<24xi8>, memref<8x1xf32>, memref<8x1xf32>)
      outs(%y : memref<2x8xf32>) attrs = {lowbit.fused = "u4"} {
  ^bb0(%in: f32, %byte: i8, %s: f32, %z: f32, %out: f32):
    
    %i1 = linalg.index 1 : index
    %i2 = linalg.index 2 : index
    %sh = affine.apply affine_map<(d1, d2) -> (((d1 * 6 + d2) * 4) mod 8)>(%i1, %i2)
    %shift = arith.index_cast %sh : index to i32
    %wide = arith.extui %byte : i8 to i32
    %moved = arith.shrui %wide, %shift : i32
    %code = arith.andi %moved, %c15_i32 : i32
    %v = arith.uitofp %code : i32 to f32
    %vz = arith.subf %v, %z : f32
    %w = arith.mulf %vz, %s : f32
    %p = arith.mulf %in, %w : f32
    %sum = arith.addf %out, %p : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// The kernel right before only fills y with +0.0: it goes, and the Tilus kernel writes y (no load of y).
// CHECK:       gpu.func @tilus_fma_u4_0(
// CHECK-NOT:     memref.load %arg4
// CHECK:         memref.store %{{.*}}, %arg4
// CHECK-LABEL: func.func @filled
// CHECK-NOT:     linalg.fill
// CHECK:         gpu.launch_func
// CHECK-SAME:    bytes = 392 : i64

memref.global "private" constant @filled_codes : memref<64xi8> = dense<33> {alignment = 64 : i64}
memref.global "private" constant @filled_scales : memref<8x2xf32> = dense<[[5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01], [5.000e-01, 2.500e-01]]> {alignment = 64 : i64}
memref.global "private" constant @filled_zeros : memref<8x2xf32> = dense<8.0> {alignment = 64 : i64}
func.func @filled(%x: memref<2x16xf32>, %y: memref<2x8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<2x8xf32>)
  %c15_i32 = arith.constant 15 : i32
  %codes = memref.get_global @filled_codes : memref<64xi8>
  %scales = memref.get_global @filled_scales : memref<8x2xf32>
  %zeros = memref.get_global @filled_zeros : memref<8x2xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                   affine_map<(d0, d1, d2) -> (((d1 * 16 + d2) * 4) floordiv 8)>,
                                   affine_map<(d0, d1, d2) -> (d1, d2 floordiv 8)>, affine_map<(d0, d1, d2) -> (d1, d2 floordiv 8)>,
                                   affine_map<(d0, d1, d2) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %codes, %scales, %zeros : memref<2x16xf32>, memref<64xi8>, memref<8x2xf32>, memref<8x2xf32>)
      outs(%y : memref<2x8xf32>) attrs = {lowbit.fused = "u4"} {
  ^bb0(%in: f32, %byte: i8, %s: f32, %z: f32, %out: f32):
    
    %i1 = linalg.index 1 : index
    %i2 = linalg.index 2 : index
    %sh = affine.apply affine_map<(d1, d2) -> (((d1 * 16 + d2) * 4) mod 8)>(%i1, %i2)
    %shift = arith.index_cast %sh : index to i32
    %wide = arith.extui %byte : i8 to i32
    %moved = arith.shrui %wide, %shift : i32
    %code = arith.andi %moved, %c15_i32 : i32
    %v = arith.uitofp %code : i32 to f32
    %vz = arith.subf %v, %z : f32
    %w = arith.mulf %vz, %s : f32
    %p = arith.mulf %in, %w : f32
    %sum = arith.addf %out, %p : f32
    linalg.yield %sum : f32
  }
  return
}
