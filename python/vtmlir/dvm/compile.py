"""`compile_graph`: the DVM compile entry point, a graph + concrete shapes -> a `CompiledKernel`
(Fang et al., DVM, §4.2, Fig. 5).

By default through the graph's bytecode templates (`template.py`; natively filled once a set is
built, `native_fill.py`); ``template=False`` runs the reference lowering (`codegen.lower`).
"""

from __future__ import annotations

import functools

from .bytecode import encode
from .codegen import lower
from .graph import Graph, GraphError
from .kernel import CompiledKernel, cached_dense_strides
from .template import compile_templated
from .tiling import Target


def compile_graph(graph: Graph, input_shapes, target: Target | None = None, input_strides=None, *,
                  template: bool = True) -> CompiledKernel:
    """Tile and encode `graph` for concrete input shapes (and element strides; default dense).

    By default through the graph's bytecode templates (`template.py`: guards, Alg. 1, the
    shape-dependent words); ``template=False`` runs the lowering itself (the reference the
    templates are tested against, bitwise)."""
    if target is None:
        target = default_target()
    if template:  # the template set's native entry point, once a compile of this graph registered it
        fast = graph.__dict__.get("_dvm_fast")
        if fast is not None:
            entry = fast.get(id(target))
            if entry is not None and entry[0] is target:
                strides = None if input_strides is None else _normalised_strides(graph, input_shapes, input_strides)
                try:
                    k = entry[1](input_shapes, strides)
                except (TypeError, ValueError):  # wrong ranks or sizes: the general path below says what
                    k = None
                if k is not None and type(k) is not list:  # a list: the native code decided nothing
                    return k
    input_shapes = tuple([tuple(map(int, shp)) for shp in input_shapes])
    if not graph.outputs:
        raise GraphError(f"{graph.name}: the graph has no outputs")
    if input_strides is None:
        input_strides = tuple(map(cached_dense_strides, input_shapes))
    else:
        input_strides = _normalised_strides(graph, input_shapes, input_strides)
    if template:
        return compile_templated(graph, input_shapes, input_strides, target)
    program, tiling, shapes = lower(graph, graph.infer_shapes(input_shapes), input_strides, target)
    return CompiledKernel(
        graph, encode(program), tiling, input_shapes, input_strides,
        tuple(shapes[o] for o in graph.outputs), tuple(graph.nodes[o].dtype for o in graph.outputs))


@functools.cache
def default_target() -> Target:
    """`Target()`, made once (it asks the OS for the CPU count: microseconds per call)."""
    return Target()


def _normalised_strides(graph: Graph, input_shapes, input_strides) -> tuple[tuple[int, ...], ...]:
    """Element strides as the compile keys them: ints, 0 along size-1 dimensions."""
    if len(input_strides) != len(input_shapes) or any(len(a) != len(b) for a, b in zip(input_strides, input_shapes)):
        raise GraphError(f"{graph.name}: one stride per input dimension expected")
    return tuple([tuple([0 if n == 1 else int(x) for x, n in zip(st, shp)]) for st, shp in zip(input_strides, input_shapes)])
