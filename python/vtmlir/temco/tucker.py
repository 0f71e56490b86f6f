"""Tucker-2 decomposition of a conv weight by HOSVD (numpy SVD), as TeMCO's baseline uses it.

TeMCO (Song et al., ICPP'24, §2.1, Fig. 1–2) decomposes a conv weight `W[F, C, kh, kw]` along its two
channel modes only (Tucker-2, Kim et al. [39]): `W ≈ G ×₀ U_out ×₁ U_in` with factor matrices
`U_in[C, R1]`, `U_out[F, R2]` and core `G[R2, R1, kh, kw]`. As a conv sequence (Fig. 2b):

    fconv  1×1, weight U_inᵀ  [R1, C, 1, 1]    C  → R1   ("Reduced1")
    core   kh×kw, weight G    [R2, R1, kh, kw] R1 → R2   (padding, stride, dilation of the original)
    lconv  1×1, weight U_out  [F, R2, 1, 1]    R2 → F    (restores the channels; the bias goes here)

HOSVD: `U_in` are the leading left singular vectors of the mode-1 unfolding `W₍₁₎ [C, F·kh·kw]`,
`U_out` those of the mode-0 unfolding `W₍₀₎ [F, C·kh·kw]`, and `G = W ×₀ U_outᵀ ×₁ U_inᵀ`. With full
ranks the factors are orthogonal bases of the unfoldings' column spaces and the reconstruction is
exact (up to rounding); truncation gives the HOSVD approximation whose error `relative_error` reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tucker2:
    """The three weights of a decomposed conv (float64)."""

    first: np.ndarray  # fconv weight [R1, C, 1, 1]
    core: np.ndarray  # core weight [R2, R1, kh, kw]
    last: np.ndarray  # lconv weight [F, R2, 1, 1]

    @property
    def ranks(self) -> tuple[int, int]:
        return self.first.shape[0], self.last.shape[1]

    def reconstruct(self) -> np.ndarray:
        """`Ŵ[F, C, kh, kw] = Σ U_out[f, o] G[o, i, h, w] U_in[c, i]`."""
        return np.einsum("oihw,fo,ic->fchw", self.core, self.last[:, :, 0, 0], self.first[:, :, 0, 0])

    @property
    def parameters(self) -> int:
        return self.first.size + self.core.size + self.last.size


def tucker2_ranks(weight_shape, rank_ratio: float) -> tuple[int, int]:
    """Ranks `(R1, R2)` for a rank ratio (paper: 0.1): `ceil(ratio · channels)`, at least 1, and at
    most the rank the mode unfolding can have (`min(C, F·kh·kw)`, `min(F, C·kh·kw)`)."""
    f, c, kh, kw = weight_shape
    r_in = max(1, math.ceil(rank_ratio * c - 1e-9))
    r_out = max(1, math.ceil(rank_ratio * f - 1e-9))
    return min(r_in, c, f * kh * kw), min(r_out, f, c * kh * kw)


def tucker2_decompose(weight: np.ndarray, ranks: tuple[int, int]) -> Tucker2:
    """HOSVD Tucker-2 decomposition of `weight[F, C, kh, kw]` with ranks `(R1, R2)`."""
    w = np.asarray(weight, dtype=np.float64)
    f, c, kh, kw = w.shape
    r_in, r_out = ranks
    mode0 = w.reshape(f, c * kh * kw)
    mode1 = w.transpose(1, 0, 2, 3).reshape(c, f * kh * kw)
    u_out = np.linalg.svd(mode0, full_matrices=False)[0][:, :r_out]  # [F, R2]
    u_in = np.linalg.svd(mode1, full_matrices=False)[0][:, :r_in]  # [C, R1]
    core = np.einsum("fchw,fo,ci->oihw", w, u_out, u_in)  # [R2, R1, kh, kw]
    return Tucker2(first=u_in.T[:, :, None, None].copy(), core=core, last=u_out[:, :, None, None].copy())


def relative_error(weight: np.ndarray, approx: np.ndarray) -> float:
    """Relative Frobenius error `‖W − Ŵ‖_F / ‖W‖_F` (0 for an all-zero weight reproduced exactly)."""
    w = np.asarray(weight, dtype=np.float64)
    norm = np.linalg.norm(w)
    diff = np.linalg.norm(w - approx)
    return float(diff / norm) if norm > 0 else float(diff)
