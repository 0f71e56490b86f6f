"""VTC (virtual tensors for data-movement elimination) at graph level.

- `catalogue`: one declarative entry per data-movement op kind: its mapping function F (VTC Def. 2)
  and virtualisation rules in both directions (VTC §4.4);
- `contiguity`: Defs. 4–5 with the target's transfer unit as a parameter, Type I / II (Thm. 1);
- `vtog`: the virtual tensor opportunity graph and conflict sets (VTC Def. 6, Alg. 1) and the
  `vt-build-vtog` analysis pass;
- `greedy`: VTC Alg. 2 (global greedy, MAXEDGES over conflict sets) with a pluggable cost model;
- `eliminate`: `vt-eliminate-data-movement` (Alg. 2 + rewrite to `vt.view`, mappings composed);
- `stores`: input-of-output chains ending in a slice update / constant pad become `vt.store_into`
  of the producer (planned and applied by `eliminate`, lowered by `lower`);
- `concat_stores`: a concat's inputs written by their producers straight into the concat buffer
  (VTC Fig. 11), or into the slice update / pad the concat fans out into;
- `lower`: `vt-lower-views` (stores into producers, views folded into `linalg.generic` indexing
  maps or read through split loop ranges, the rest gathered);
- `select_views`: the per-element select form of reading a multi-piece view (`min-piece=`);
- `reindex`: re-indexing a generic's loops (destination boxes, piece boundaries).

See docs/vtc.md.
"""

from .catalogue import (
    CATALOGUE,
    IN_PLACE,
    INPUT_OF_OUTPUT,
    OUTPUT_OF_INPUT,
    Analysis,
    Candidate,
    DataMovementKind,
    NotVirtualisable,
    Rule,
    analyse,
    entry_for,
    is_data_movement,
)
from .contiguity import (
    CPU_CACHE_LINE,
    CUDA_COALESCING,
    TYPE_I,
    TYPE_II,
    Contiguity,
    PieceContiguity,
    Profitability,
    TransferUnit,
    classify,
    contiguity,
    piece_contiguity,
)
from .lower_views import fold_views
from .memory_check import backend_peak, function_named, peak_of_edited_copy
from .reindex import loop_extents

__all__ = [
    "CATALOGUE", "IN_PLACE", "INPUT_OF_OUTPUT", "OUTPUT_OF_INPUT", "Analysis", "Candidate",
    "DataMovementKind", "NotVirtualisable", "Rule", "analyse", "entry_for", "is_data_movement",
    "CPU_CACHE_LINE", "CUDA_COALESCING", "TYPE_I", "TYPE_II", "Contiguity", "PieceContiguity",
    "Profitability", "TransferUnit", "classify", "contiguity", "piece_contiguity",
    "fold_views", "loop_extents", "backend_peak", "function_named", "peak_of_edited_copy",
]
