"""The check every backend entry makes first: graph-level ops that no code generation lowers.

`vtmlir.compile` and `measure_peak_memory` run it on the graph-level module before a backend sees it,
so that a torch-level module or an unlowered `vt`/`layout` op is refused with the op's name and
location rather than failing deep inside a conversion pass.
"""

from __future__ import annotations

from ..errors import UnsupportedOpError, format_location
from ..ir_utils import walk_ops


# Dialects the graph level may hold that no backend lowers (yet), and what to tell the user.
_NOT_LOWERABLE = {
    "torch": "the module is at torch level; vtmlir.compile needs linalg-on-tensors "
             "(the default output_type of vtmlir.import_torch)",
    "torch_c": "the module is at torch level; vtmlir.compile needs linalg-on-tensors "
               "(the default output_type of vtmlir.import_torch)",
    "vt": "vt ops are lowered by vt-lower-views (compile runs it); one is left unlowered",
    "layout": "layout conversions have no lowering to kernels yet",
}


def check_lowerable(module) -> None:
    """Refuse, naming the op and its location, graph-level ops that code generation cannot lower."""
    for op in walk_ops(module):
        dialect = op.name.split(".", 1)[0]
        if dialect in _NOT_LOWERABLE:
            where = format_location(op.location, "<module>")
            raise UnsupportedOpError(f"{where}: error: cannot compile '{op.name}': {_NOT_LOWERABLE[dialect]}",
                                     op_name=op.name)
