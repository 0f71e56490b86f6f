// RUN: vt-opt %s --split-input-file --copy-updated-arguments | filecheck %s --check-prefix=COPY
// RUN: vt-opt %s --split-input-file --pass-pipeline="builtin.module(copy-updated-arguments, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, drop-donated-results, buffer-results-to-out-params{modify-public-functions hoist-static-allocs})" | filecheck %s --check-prefix=BUF

// A cache update (the decode layer's `cache[:, p] = k` on a clone of the input). Read-only cache:
// it is copied once at the entry and every use reads the copy, which becomes the caller's
// out-parameter: the update writes there, the argument is never written.
// COPY-LABEL: func.func @update
// COPY-SAME:    (%[[C:.*]]: tensor<4x8xf32> {bufferization.writable = false}, %[[K:.*]]: tensor<1x8xf32> {bufferization.writable = false})
// COPY-NEXT:    %[[COPY:.*]] = bufferization.alloc_tensor() copy(%[[C]])
// COPY-NEXT:    tensor.insert_slice %[[K]] into %[[COPY]][3, 0] [1, 8] [1, 1]
// BUF-LABEL: func.func @update
// BUF-SAME:    (%[[C:.*]]: memref<4x8xf32>, %[[K:.*]]: memref<1x8xf32>, %[[OUT:.*]]: memref<4x8xf32>)
// BUF-NOT:     memref.alloc
// BUF:         memref.copy %[[C]], %[[OUT]]
// BUF:         %[[SLOT:.*]] = memref.subview %[[OUT]][3, 0] [1, 8] [1, 1]
// BUF:         memref.copy %[[K]], %[[SLOT]]
// BUF-NEXT:    return
func.func @update(%cache: tensor<4x8xf32>, %k: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %u = tensor.insert_slice %k into %cache[3, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  return %u : tensor<4x8xf32>
}

// -----

// Donated (`vtmlir.donated`, what `compile(..., donate=(0,))` sets): writable, updated in place,
// and the result is the argument itself -- dropped, no out-parameter, no copy; where each result
// lives is recorded (-1: an out-parameter).
// COPY-LABEL: func.func @donated
// COPY-SAME:    {bufferization.writable = true, vtmlir.donated}
// COPY-NOT:     bufferization.alloc_tensor
// BUF-LABEL: func.func @donated
// BUF-SAME:    (%[[C:.*]]: memref<4x8xf32> {vtmlir.donated}, %[[K:.*]]: memref<1x8xf32>, %[[OUT:.*]]: memref<1x8xf32>)
// BUF-SAME:    attributes {vtmlir.result_arguments = array<i64: 0, -1>}
// BUF-NOT:     memref.alloc
// BUF:         %[[SLOT:.*]] = memref.subview %[[C]][3, 0] [1, 8] [1, 1]
// BUF:         memref.copy %[[K]], %[[SLOT]]
// BUF:         memref.copy %[[K]], %[[OUT]]
// BUF-NEXT:    return
func.func @donated(%cache: tensor<4x8xf32> {vtmlir.donated}, %k: tensor<1x8xf32>) -> (tensor<4x8xf32>, tensor<1x8xf32>) {
  %u = tensor.insert_slice %k into %cache[3, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
  return %u, %k : tensor<4x8xf32>, tensor<1x8xf32>
}

// -----

// Only read: nothing to copy (the argument is marked read-only all the same).
// COPY-LABEL: func.func @read_only
// COPY-SAME:    {bufferization.writable = false}
// COPY-NOT:     bufferization.alloc_tensor
// BUF-LABEL: func.func @read_only
func.func @read_only(%x: tensor<4xf32>) -> tensor<2xf32> {
  %s = tensor.extract_slice %x[0] [2] [1] : tensor<4xf32> to tensor<2xf32>
  return %s : tensor<2xf32>
}
