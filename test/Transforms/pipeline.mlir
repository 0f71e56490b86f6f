// vtmlir passes mix with upstream passes in one pipeline, given as --pass-pipeline or as flags.
// RUN: vt-opt %s --pass-pipeline='builtin.module(vt-stats{report=-}, func.func(canonicalize), cse, vt-stats{report=-})' -o /dev/null 2>&1 | filecheck %s --check-prefix=STATS
// RUN: vt-opt %s --vt-stats -canonicalize --cse --vt-stats='annotate=true' 2>/dev/null | filecheck %s
// RUN: vt-opt %s --pass-pipeline='vt-stats,canonicalize' --mlir-print-ir-after-all -o /dev/null 2>&1 | filecheck %s --check-prefix=DUMP
// RUN: vt-opt %s --vt-stats --convert-linalg-to-loops --dump-pass-pipeline -o /dev/null 2>&1 | filecheck %s --check-prefix=NEST

// The first vt-stats sees a dead transpose and two identical slices; canonicalize and cse remove them.
// STATS:      func @slices: 0 compute, 3 data-movement, 0 view, 0 other; 6144 bytes moved
// STATS:      func @slices: 0 compute, 1 data-movement, 0 view, 0 other; 2048 bytes moved
// STATS-NOT:  func @slices

// CHECK-LABEL: func.func @slices
// CHECK-SAME:    (%[[ARG0:.*]]: tensor<16x64xf32>)
// CHECK:         %[[S:.*]] = tensor.extract_slice %[[ARG0]][0, 0] [8, 64] [1, 1] {vt.stats.bytes = 2048 : i64, vt.stats.kind = "data-movement"}
// CHECK-NOT:     linalg.transpose
// CHECK-NOT:     tensor.extract_slice
// CHECK:         return %[[S]], %[[S]]

// DUMP: IR Dump After VtStats: vt-stats
// DUMP: IR Dump After Canonicalizer

// NEST: builtin.module(vt-stats,convert-linalg-to-loops)
func.func @slices(%t: tensor<16x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %a = tensor.extract_slice %t[0, 0] [8, 64] [1, 1] : tensor<16x64xf32> to tensor<8x64xf32>
  %b = tensor.extract_slice %t[0, 0] [8, 64] [1, 1] : tensor<16x64xf32> to tensor<8x64xf32>
  %init = tensor.empty() : tensor<64x8xf32>
  %dead = linalg.transpose ins(%a : tensor<8x64xf32>) outs(%init : tensor<64x8xf32>) permutation = [1, 0]
  return %a, %b : tensor<8x64xf32>, tensor<8x64xf32>
}
