// RUN: vt-opt %s --dvm-fuse | filecheck %s
// RUN: vt-opt %s --dvm-fuse='report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=REPORT
// RUN: vt-opt %s --dvm-fuse='stacking=false report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=NOSTACK
// RUN: not vt-opt %s --dvm-fuse='report=%t.missing/r.txt' -o /dev/null 2>&1 | filecheck %s --check-prefix=ERR

// dvm-fuse decides from shape symbols (DVM §5.2), never from sizes: `?` dims get symbols from
// `vtmlir.symbolic_shape` (what import_torch records) or fresh ones (arg<i>.<d>), and
// tensor.dim / tensor.empty / indexing maps / reshapes propagate them.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
#red = affine_map<(d0, d1) -> (d0, 0)>
#tr = affine_map<(d0, d1) -> (d1, d0)>

// Elementwise chain + reduction + its epilogue: one vector kernel (pattern-based).
// CHECK-LABEL: func.func @chain_and_reduce
// CHECK:         linalg.generic {{.*}}dvm.domain = ["arg0.0", "64"], dvm.fusion = "pattern", dvm.group = 0 : i64, dvm.kind = "vector"
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<?x1xf32>) -> tensor<?x1xf32>{{$}}
// CHECK:         linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}}dvm.group = 0 : i64
// CHECK:         linalg.generic {{.*}}dvm.group = 0 : i64
// REPORT-LABEL: func @chain_and_reduce: 1 kernels from 3 fusible ops
// REPORT-NEXT:  kernel 0: vector [pattern] domain [arg0.0, 64]: linalg.generic x3
func.func @chain_and_reduce(%x: tensor<?x64xf32>, %w: tensor<64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %r = tensor.empty(%n) : tensor<?x1xf32>
  %add = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %w : tensor<?x64xf32>, tensor<64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%r : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "reduction"]}
      ins(%add : tensor<?x64xf32>) outs(%acc : tensor<?x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  %sub = linalg.generic {indexing_maps = [#id, #red, #id], iterator_types = ["parallel", "parallel"]}
      ins(%add, %sum : tensor<?x64xf32>, tensor<?x1xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x64xf32>
  return %sub : tensor<?x64xf32>
}

// Matmul + elementwise epilogue: one cube-vector kernel; a reduction after it starts a new one.
// CHECK-LABEL: func.func @matmul_epilogue
// CHECK:         linalg.matmul {dvm.domain = ["arg0.0", "32"], dvm.fusion = "pattern", dvm.group = 0 : i64, dvm.kind = "cube-vector"}
// CHECK:         linalg.generic {{.*}}dvm.group = 0 : i64, dvm.kind = "cube-vector"
// CHECK:         linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}}dvm.fusion = "single", dvm.group = 1 : i64, dvm.kind = "vector"
// REPORT-LABEL: func @matmul_epilogue: 2 kernels from 3 fusible ops
// REPORT-NEXT:  kernel 0: cube-vector [pattern] domain [arg0.0, 32]: linalg.matmul x1, linalg.generic x1
// REPORT-NEXT:  kernel 1: vector [single] domain [arg0.0, 32]: linalg.generic x1
func.func @matmul_epilogue(%x: tensor<?x16xf32>, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<?x1xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x16xf32>
  %e = tensor.empty(%n) : tensor<?x32xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<?x16xf32>, tensor<16x32xf32>) outs(%acc : tensor<?x32xf32>) -> tensor<?x32xf32>
  %relu = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<?x32xf32>, tensor<32xf32>) outs(%e : tensor<?x32xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %m = arith.maximumf %s, %zero : f32
    linalg.yield %m : f32
  } -> tensor<?x32xf32>
  %r = tensor.empty(%n) : tensor<?x1xf32>
  %racc = linalg.fill ins(%zero : f32) outs(%r : tensor<?x1xf32>) -> tensor<?x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "reduction"]}
      ins(%relu : tensor<?x32xf32>) outs(%racc : tensor<?x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<?x1xf32>
  return %sum : tensor<?x1xf32>
}

// Stacking: independent ops over the same symbols share a kernel (the import's symbols say both
// arguments have s0 rows); an op over an unrelated `?` (arg2.0) stays alone although all three
// may be equal at run time.
// CHECK-LABEL: func.func @stacking
// CHECK:         linalg.generic {{.*}}dvm.domain = ["s0", "8"], dvm.fusion = "stack", dvm.group = 0
// CHECK:         linalg.generic {{.*}}dvm.domain = ["s0", "8"], dvm.fusion = "stack", dvm.group = 0
// CHECK:         linalg.generic {{.*}}dvm.domain = ["arg2.0", "8"], dvm.fusion = "single", dvm.group = 1
// REPORT-LABEL: func @stacking: 2 kernels from 3 fusible ops
// REPORT-NEXT:  kernel 0: vector [stack] domain [s0, 8]: linalg.generic x2
// REPORT-NEXT:  kernel 1: vector [single] domain [arg2.0, 8]: linalg.generic x1
// NOSTACK-LABEL: func @stacking: 3 kernels from 3 fusible ops
func.func @stacking(%x: tensor<?x8xf32> {vtmlir.symbolic_shape = ["s0", "8"]},
                    %y: tensor<?x8xf32> {vtmlir.symbolic_shape = ["s0", "8"]},
                    %z: tensor<?x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %ex = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x8xf32>) outs(%x : tensor<?x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  %ey = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<?x8xf32>) outs(%y : tensor<?x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.sqrt %a : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  %ez = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%z : tensor<?x8xf32>) outs(%z : tensor<?x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  return %ex, %ey, %ez : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// Symbol deduction through a collapse: [s0, s1, 8] collapses to [s0 * s1, 8], the symbol the
// second argument carries, so the two independent ops stack. A transposed read of a kernel's
// result does not fuse with it (the VM keeps values in domain order).
// CHECK-LABEL: func.func @collapse_and_transpose
// CHECK:         tensor.collapse_shape
// CHECK:         linalg.generic {{.*}}dvm.domain = ["s0 * s1", "8"], dvm.fusion = "stack", dvm.group = 0
// CHECK:         linalg.generic {{.*}}dvm.domain = ["s0 * s1", "8"], dvm.fusion = "stack", dvm.group = 0
// CHECK:         linalg.generic {{.*}}dvm.domain = ["8", "s0 * s1"], dvm.fusion = "single", dvm.group = 1
func.func @collapse_and_transpose(%x: tensor<?x?x8xf32> {vtmlir.symbolic_shape = ["s0", "s1", "8"]},
                                  %y: tensor<?x8xf32> {vtmlir.symbolic_shape = ["s1 * s0", "8"]},
                                  %t: tensor<8x?xf32>) -> (tensor<?x8xf32>, tensor<8x?xf32>) {
  %flat = tensor.collapse_shape %x [[0, 1], [2]] : tensor<?x?x8xf32> into tensor<?x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%flat : tensor<?x8xf32>) outs(%flat : tensor<?x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<?x8xf32>) outs(%y : tensor<?x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<?x8xf32>
  %c = linalg.generic {indexing_maps = [#tr, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %t : tensor<?x8xf32>, tensor<8x?xf32>) outs(%t : tensor<8x?xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %s = arith.addf %v, %w : f32
    linalg.yield %s : f32
  } -> tensor<8x?xf32>
  return %b, %c : tensor<?x8xf32>, tensor<8x?xf32>
}

// ERR: error: dvm-fuse: cannot write
