// RUN: not vt-opt %s --subbyte-lower 2>&1 | filecheck %s --check-prefix=ERR

// A sub-byte tensor read by anything but a linalg.generic cannot be lowered.
// ERR: error: subbyte-lower: the sub-byte tensor is used by 'tensor.extract_slice'
func.func @bad_user() -> tensor<4xi4> {
  %packed = arith.constant dense<0> : tensor<4xi8>
  %codes = "lowbit.unpack"(%packed) {dtype = "u4", position = affine_map<(d0) -> (d0)>, tile_layout = ""} : (tensor<4xi8>) -> tensor<8xi4>
  %s = tensor.extract_slice %codes[0] [4] [1] : tensor<8xi4> to tensor<4xi4>
  return %s : tensor<4xi4>
}
