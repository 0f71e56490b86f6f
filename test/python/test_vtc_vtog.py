"""VTC contiguity (Defs. 4–5, Thm. 1) on the paper's examples, and the VTOG (Alg. 1) on real models."""

import pytest
import torch
from torch_mlir import ir

import vtmlir
from vtmlir.context import make_context
from vtmlir.dialects import MappingFunction, Piece
from vtmlir.models import get
from vtmlir.passes.pipeline import run_pipeline
from vtmlir.vtc import TYPE_I, TYPE_II, classify, contiguity
from vtmlir.vtc.build_vtog import build_vtogs

CTX = make_context()


@pytest.fixture(scope="module")
def ctx():
    with CTX, ir.Location.unknown():
        yield CTX


def amap(text):
    return ir.AffineMapAttr(ir.Attribute.parse(f"affine_map<{text}>")).value


def test_eq2_expand_is_type_ii_with_inner_runs(ctx):
    # VTC Eq. 2: expand (a, b, c) -> (a, 3b, c), the expanded tensor virtual: offset
    # i·bc + (j mod b)·c + k, bias −⌊j/b⌋·bc depends on j, so dim 2 (0-based) is the first
    # contiguous one and runs are c long.
    a, b, c = 2, 4, 32
    m = MappingFunction.single(amap(f"(i, j, k) -> (i, j mod {b}, k)"))
    letter = contiguity(m, [a, 3 * b, c], [[a, b, c]], refine=False)
    assert letter.min_contiguous_dim == 2 and letter.run == c and not letter.full
    # Delinearising j = (copy, j mod b) shows each of the 3 copies is one run of b·c elements.
    cont = contiguity(m, [a, 3 * b, c], [[a, b, c]])
    assert cont.min_contiguous_dim == 2 and cont.run == b * c and not cont.full
    assert classify(m, [a, 3 * b, c], [[a, b, c]], 4, 128, refine=False).contiguity == "partial"
    assert classify(m, [a, 3 * b, c], [[a, b, c]], 4, 256, refine=False).contiguity == "none"
    assert classify(m, [a, 3 * b, c], [[a, b, c]], 4, 256).contiguity == "partial"


def test_fig5_split_axis0_is_type_i_other_axes_type_ii(ctx):
    # VTC Fig. 5 / §4.4 Split: the halves of a row-major (4, 8) matrix.
    top = MappingFunction.single(amap("(i, j) -> (i + 2, j)"))
    left = MappingFunction.single(amap("(i, j) -> (i, j + 4)"))
    assert classify(top, [2, 8], [[4, 8]], 4).type == TYPE_I
    p = classify(left, [4, 4], [[4, 8]], 4)
    assert p.type == TYPE_II and p.run_elements == 4 and p.min_contiguous_dim == 1


def test_fig3_qkv_mapping_is_partially_contiguous_per_head(ctx):
    # VTC Fig. 3: c[i, j] (batch 16, 4096 + 1024 + 1024) -> Q[i, j], K_cache[i, (j-4096)/128,
    # pos, (j-4096) mod 128], V_cache likewise; bf16. The paper: runs of 128 (head dim) > warp.
    pos, ctxlen = 7, 4096
    m = MappingFunction([
        Piece(0, amap("(i, j) -> (i, j)"), ((1, 0, 4096),)),
        Piece(1, amap(f"(i, j) -> (i, (j - 4096) floordiv 128, {pos}, (j - 4096) mod 128)"),
              ((1, 4096, 5120),)),
        Piece(2, amap(f"(i, j) -> (i, (j - 5120) floordiv 128, {pos}, (j - 5120) mod 128)"),
              ((1, 5120, 6144),)),
    ])
    shapes = [[16, 4096], [16, 8, ctxlen, 128], [16, 8, ctxlen, 128]]
    cont = contiguity(m, [16, 6144], shapes)
    assert [p.run for p in cont.pieces] == [4096, 128, 128]
    p = classify(m, [16, 6144], shapes, 2, 128)
    assert (p.type, p.contiguity, p.run_elements, p.run_bytes) == (TYPE_II, "partial", 128, 256)
    # The letter of Def. 4 (no delinearisation) sees no contiguous dim in the cache pieces.
    assert contiguity(m, [16, 6144], shapes, refine=False).run == 1


def test_identity_and_transpose(ctx):
    assert classify(MappingFunction.identity(3), [2, 3, 4], [[2, 3, 4]], 4).type == TYPE_I
    t = classify(MappingFunction.permutation([1, 0]), [64, 64], [[64, 64]], 4)
    assert (t.type, t.contiguity, t.run_elements) == (TYPE_II, "none", 1)
    # Unit dims are don't-care: swapping a size-1 dim keeps a tensor fully contiguous.
    assert classify(MappingFunction.permutation([0, 2, 1, 3]), [1, 4, 1, 16], [[1, 1, 4, 16]], 4).type == TYPE_I


def test_exact_division_is_linear(ctx):
    # (4i + j) floordiv 4 = i and (4i + j) mod 4 = j for 0 <= j < 4: a flatten then unflatten.
    m = MappingFunction.single(amap("(i, j) -> ((i * 4 + j) floordiv 4, (i * 4 + j) mod 4)"))
    assert classify(m, [5, 4], [[5, 4]], 4).type == TYPE_I


def _vtog_of_model(model, *inputs):
    module = vtmlir.import_torch(model, *inputs)
    (graph,) = build_vtogs(module)
    return module, graph


def test_llama_decoder_layer_vtog():
    model, inputs = get("llama_decoder_layer").build(batch=1)
    module, g = _vtog_of_model(model, *inputs)
    kinds = {e.candidate.kind for e in g.edges}
    assert {"transpose", "reshape", "slice", "concat", "insert-slice", "permute/broadcast"} <= kinds
    # Graph inputs (x, caches, weights) and outputs (x', k_cache', v_cache') never become virtual.
    for e in g.edges:
        assert not g.nodes[e.src].must_be_physical
    outs = [n for n in g.nodes if n.role == "output"]
    assert len(outs) == 3
    # The K/V rows computed this step can be written straight into the updated caches (ScatterND
    # rule 2), while the cache outputs themselves stay physical.
    updates = [e for e in g.edges if e.candidate.kind == "insert-slice"]
    assert len(updates) == 2 and all(e.candidate.direction == "input-of-output" for e in updates)
    assert all(g.nodes[e.dst].role == "output" for e in updates)
    # GQA repeat_kv (a broadcasting generic) reads the cache slice through a Type II mapping with
    # whole head_dim x seq runs.
    bcast = [e for e in g.edges if e.candidate.kind == "permute/broadcast"
             and e.candidate.direction == "output-of-input"]
    assert bcast and all(e.profit.type == TYPE_II and e.profit.contiguity == "partial" for e in bcast)
    # Every conflict pair is two outgoing edges of the same node.
    for nid, pairs in g.conflicts.items():
        for a, b in pairs:
            assert g.edges[a].src == nid == g.edges[b].src
    # The rope concat of a tensor with itself: the input can be a view of either half, not both.
    selfcat = [pairs for nid, pairs in g.conflicts.items()
               if any(g.edges[a].candidate.kind == "concat" and g.edges[a].dst == g.edges[b].dst
                      for a, b in pairs)]
    assert selfcat


class ChannelShuffle(torch.nn.Module):
    """ShuffleNet's channel shuffle between two 1x1 convs: reshape -> transpose -> reshape."""

    def __init__(self, channels=16, groups=4):
        super().__init__()
        self.groups = groups
        self.conv1 = torch.nn.Conv2d(channels, channels, 1)
        self.conv2 = torch.nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        x = self.conv1(x)
        b, c, h, w = x.shape
        x = x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(b, c, h, w)
        return self.conv2(x)


def test_channel_shuffle_vtog_and_pass():
    model = ChannelShuffle().eval()
    x = torch.randn(1, 16, 8, 8)
    module, g = _vtog_of_model(model, x)
    by_kind = {}
    for e in g.edges:
        by_kind.setdefault(e.candidate.kind, []).append(e)
    assert {"reshape", "transpose"} <= set(by_kind)
    # The shuffle's transpose swaps (groups, channels/group) with h·w = 64 floats (256 B) inside:
    # partially contiguous for a 128-byte unit, Type II.
    (t_out,) = [e for e in by_kind["transpose"] if e.candidate.direction == "output-of-input"]
    assert (t_out.profit.type, t_out.profit.contiguity, t_out.profit.run_elements) == (TYPE_II, "partial", 64)
    # A view chain: every intermediate of reshape-transpose-reshape has edges both ways and each
    # node of the chain has a conflict (it can be a view of its producer or of its consumer).
    chain = {g.nodes[e.src].name for e in g.edges}
    assert all(g.nodes[nid].name in chain for nid in g.conflicts)
    assert len(g.conflicts) >= 2
    # Through vt-opt's pass pipeline too, with text and DOT written to files.
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        text, dot = os.path.join(d, "vtog.txt"), os.path.join(d, "vtog.dot")
        run_pipeline(module, f"vt-build-vtog{{report={text} dot={dot} target=cpu}}")
        body = open(text).read()
        assert body.startswith("vtog @main:") and "linalg.transpose" in body and "S(" in body
        assert open(dot).read().startswith('digraph "vtog_main"')
