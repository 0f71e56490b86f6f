// The torch importer's output for zoo models, at both levels.
// RUN: vtmlir import mlp | filecheck %s --check-prefix=LINALG
// RUN: vtmlir import mlp --output-type=torch | filecheck %s --check-prefix=TORCH
// RUN: vtmlir import resnet_basic_block | filecheck %s --check-prefix=CONV
// RUN: not vtmlir import no_such_model 2>&1 | filecheck %s --check-prefix=UNKNOWN

// LINALG-LABEL: func.func @main(
// LINALG-SAME:    %{{.*}}: tensor<1x{{[0-9]+}}xf32>
// LINALG:         linalg.matmul
// LINALG-NOT:     torch.aten
// LINALG:         return

// TORCH-LABEL: func.func @main(
// TORCH-SAME:    !torch.vtensor<[1,{{[0-9]+}}],f32>
// TORCH:         torch.aten.mm
// TORCH:         torch.aten.erf
// TORCH-NOT:     linalg.

// CONV-LABEL: func.func @main(
// CONV:         tensor.pad
// CONV:         linalg.conv_2d_nchw_fchw
// CONV:         linalg.conv_2d_nchw_fchw
// CONV:         return

// UNKNOWN: error: unknown model 'no_such_model'
