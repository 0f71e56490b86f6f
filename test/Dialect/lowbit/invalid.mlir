// RUN: vt-opt %s --split-input-file --verify-diagnostics

func.func @f(%p: tensor<7xi8>) -> tensor<8x2xi3> {
  // expected-error @+1 {{dtype 'u4' has 4-bit codes but the result holds 3-bit codes}}
  %a = "lowbit.unpack"(%p) {dtype = "u4", position = affine_map<(d0, d1) -> (d1 * 8 + d0)>, tile_layout = ""} : (tensor<7xi8>) -> tensor<8x2xi3>
  return %a : tensor<8x2xi3>
}

// -----

func.func @f(%p: tensor<5xi8>) -> tensor<8x2xi3> {
  // expected-error @+1 {{packed holds 5 bytes, fewer than 16 codes of 3 bits}}
  %a = "lowbit.unpack"(%p) {dtype = "i3", position = affine_map<(d0, d1) -> (d1 * 8 + d0)>, tile_layout = ""} : (tensor<5xi8>) -> tensor<8x2xi3>
  return %a : tensor<8x2xi3>
}

// -----

func.func @f(%p: tensor<7xi8>) -> tensor<8x2xi3> {
  // expected-error @+1 {{position must map the 2 result indices to one stream position}}
  %a = "lowbit.unpack"(%p) {dtype = "i3", position = affine_map<(d0) -> (d0)>, tile_layout = ""} : (tensor<7xi8>) -> tensor<8x2xi3>
  return %a : tensor<8x2xi3>
}

// -----

func.func @f(%p: tensor<7xi8>) -> tensor<8x2xi3> {
  // expected-error @+1 {{dtype 'q3' is not a low-bit type name}}
  %a = "lowbit.unpack"(%p) {dtype = "q3", position = affine_map<(d0, d1) -> (d1 * 8 + d0)>, tile_layout = ""} : (tensor<7xi8>) -> tensor<8x2xi3>
  return %a : tensor<8x2xi3>
}

// -----

func.func @f(%p: tensor<7xi32>) -> tensor<8x2xi3> {
  // expected-error @+1 {{packed must be a static 1-d tensor of i8}}
  %a = "lowbit.unpack"(%p) {dtype = "i3", position = affine_map<(d0, d1) -> (d1 * 8 + d0)>, tile_layout = ""} : (tensor<7xi32>) -> tensor<8x2xi3>
  return %a : tensor<8x2xi3>
}

// -----

func.func @f(%p: tensor<7xi8>) -> tensor<8x2xf16> {
  // expected-error @+1 {{result element type must hold 1-8 bit codes}}
  %a = "lowbit.unpack"(%p) {dtype = "i3", position = affine_map<(d0, d1) -> (d1 * 8 + d0)>, tile_layout = ""} : (tensor<7xi8>) -> tensor<8x2xf16>
  return %a : tensor<8x2xf16>
}

// -----

func.func @f(%p: tensor<7xi8>) -> tensor<8x2xi3> {
  // expected-error @+1 {{attribute dtype is expected but not provided}}
  %a = "lowbit.unpack"(%p) {position = affine_map<(d0, d1) -> (d1 * 8 + d0)>, tile_layout = ""} : (tensor<7xi8>) -> tensor<8x2xi3>
  return %a : tensor<8x2xi3>
}
