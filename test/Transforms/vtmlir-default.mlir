// RUN: vt-opt %s --pass-pipeline='builtin.module(vtmlir-default{target=cpu opt-level=2 report=%t.txt})' | filecheck %s
// RUN: filecheck %s --input-file=%t.txt --check-prefix=REPORT
// RUN: vt-opt %s --vtmlir-default='opt-level=0 report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=LEVEL0
// RUN: vt-opt %s --vtmlir-default='target=cuda report=-' -o /dev/null 2>&1 | filecheck %s --check-prefix=CUDA
// RUN: not vt-opt %s --vtmlir-default='opt-level=3' 2>&1 | filecheck %s --check-prefix=BAD

// A transpose feeding an elementwise op: VTC makes it a view, vt-lower-views folds the view into the
// consumer's indexing map (no transpose, no vt op left); no convolution, so no layout step.
// CHECK-LABEL: func.func @main
// CHECK-NOT:     linalg.transpose
// CHECK-NOT:     vt.view
// CHECK:         linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}]
// CHECK:         return

// REPORT:      opt level 2 (cpu): 1 step(s)
// REPORT-NEXT: vtc: vt-eliminate-data-movement{target=cpu}, then vt-lower-views
// REPORT-NEXT:   why: 1 data-movement op(s)
// REPORT-NEXT:   data-movement ops: 1 -> 0
// REPORT-NEXT:   data-movement bytes: 128 -> 0
// REPORT:      layouts: not run (no 2-d convolution)
// REPORT:      temco: not run (no decomposed convolution and no memory budget)
// REPORT:      lowbit: not run (no quantised weight)

// LEVEL0: opt level 0 (cpu): 0 step(s)
// LEVEL0: all: not run (opt level 0)

// CUDA:      opt level 2 (cuda): 1 step(s)
// CUDA-NEXT: vtc: vt-eliminate-data-movement{target=cuda}, then vt-lower-views
// CUDA:        unit 128 B
// CUDA:      layouts: not run (no layout time model for the cuda kernels
// CUDA:      lowbit: not run (no quantised weight)

// BAD: error: vtmlir-default: opt-level must be one of (0, 1, 2), got 3

#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.transpose ins(%x : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) permutation = [1, 0]
  %o = tensor.empty() : tensor<8x4xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<8x4xf32>) outs(%o : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  } -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
