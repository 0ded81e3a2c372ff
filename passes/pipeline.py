"""The optimization pipeline: one function listing the passes in order.

``steps()`` is the list of named passes; ``FIXED_POINTS`` the runs of them repeated until they change
nothing (folding constants may let shape inference settle more, which may fold more). ``optimize``
runs them with one PassManager (passes/base.py) on the main graph, then on every control-flow body
(passes/bodies.py), so ``check=True`` runs the IR checker after every step of every graph and
``dump_after`` prints the IR after the named steps (or "all") wherever they ran.
"""

from __future__ import annotations

import sys
from typing import TextIO

from onnxc.ir import Model

from .base import PassManager, Step
from .bodies import optimize_bodies
from .eliminate_common_subexpressions import eliminate_common_subexpressions
from .eliminate_dead_code import eliminate_dead_code
from .fold_batchnorm import fold_batchnorm
from .fold_constants import fold_constants
from .fold_weight_dequant import fold_weight_dequant
from .fuse_attention import fuse_attention
from .fuse_depthwise_pointwise import fuse_depthwise_pointwise
from .fuse_elementwise import fuse_elementwise
from .fuse_epilogues import fuse_epilogues
from .fuse_input_scale import fuse_input_scale
from .fuse_integer_dequant import fuse_integer_dequant
from .infer_shapes import infer_shapes
from .inline_functions import inline_functions
from .lift_captures import lift_captures
from .lower_qdq import lower_qdq
from .merge_bn_affine import merge_affine
from .name_activations import name_activations
from .remove_identities import remove_identities
from .spell_out_batchnorm import spell_out_batchnorm


def steps() -> list[Step]:
    return [
        Step("inline_functions", inline_functions),
        Step("lift_captures", lift_captures),
        Step("eliminate_dead_code", eliminate_dead_code),
        Step("lower_qdq", lower_qdq),
        Step("infer_shapes", infer_shapes),
        Step("fold_constants", fold_constants),
        Step("fold_weight_dequant", fold_weight_dequant),
        Step("merge_affine", merge_affine),
        Step("fold_batchnorm", fold_batchnorm),
        Step("eliminate_common_subexpressions", eliminate_common_subexpressions),
        Step("remove_identities", remove_identities),
        Step("fuse_attention", fuse_attention),
        Step("name_activations", name_activations),
        Step("fuse_integer_dequant", fuse_integer_dequant),
        Step("fuse_epilogues", fuse_epilogues),
        Step("fuse_depthwise_pointwise", fuse_depthwise_pointwise),
        Step("fuse_input_scale", fuse_input_scale),
        Step("spell_out_batchnorm", spell_out_batchnorm),
        Step("fuse_elementwise", fuse_elementwise),
        Step("eliminate_dead_code", eliminate_dead_code),
    ]


FIXED_POINTS: list[tuple[str, ...]] = [("infer_shapes", "fold_constants")]


def step_names() -> list[str]:
    """The distinct step names, in pipeline order (what ``dump_after`` accepts)."""
    return list(dict.fromkeys(s.name for s in steps()))


def optimize(model: Model, check: bool = False, dump_after: set[str] | str | None = None,
             out: TextIO = sys.stderr, manager: PassManager | None = None) -> Model:
    """Run every pass in order on the main graph, then on the control-flow bodies; the optimized model.
    ``manager``: one to reuse (its trace records every step run), else one made from the arguments."""
    pm = manager or PassManager(check=check, dump_after=dump_after, out=out)
    model = pm.run(model, steps(), FIXED_POINTS)
    optimize_bodies(model, lambda body, where: pm.run(body, steps(), FIXED_POINTS, where))
    return model
