"""VTensor (Gao et al., "VTensor: Using Virtual Tensors to Build a Layout-Oblivious AI Programming
Framework") in vtmlir: kernel layout conventions, layout resolution and layout selection.

- `conventions`: the per-target kernel tables (§4.2 library descriptions): `Target`,
  `KernelConvention`, `Variant`, `AnyLayout`, `register_target`, `get_target`, `TARGETS`;
- `resolve`: Fig. 8's resolution, the IR form of resolved layouts (attributes + conversion units),
  `resolve_function`, `apply_resolution`, `strip_conversions`;
- `ewo`: element-wise optimisation (§5.2) as an ILP solved with HiGHS, with a brute-force oracle;
- `resolve` also holds the registered pass `layout-resolve`, `select_ilp` the pass `layout-select-ilp`,
  `report` their report;
- `hoist`: the registered pass `layout-hoist` (LHO, §5.2: shared and folded conversions);
- `materialize`: the registered pass `layout-materialize` (physical form of every layout,
  constants re-laid at compile time, bitwise-identical results), with `blocked` (split loops for
  blocked layouts, conversions as expand_shape + transpose, output-order loop reordering) and
  `views` (conversions as free VTC views folded into their consumers, or reshapes, where VTC's
  contiguity analysis and a bytes cost rule say so).

See docs/layouts.md.
"""

from .conventions import (
    TARGETS,
    AnyLayout,
    KernelConvention,
    KernelSite,
    Target,
    Variant,
    get_target,
    register_target,
)
from .resolve import Decision, Resolution, apply_resolution, resolve_function, strip_conversions

__all__ = [
    "TARGETS", "AnyLayout", "Decision", "KernelConvention", "KernelSite", "Resolution", "Target",
    "Variant", "apply_resolution", "get_target", "register_target", "resolve_function",
    "strip_conversions",
]
