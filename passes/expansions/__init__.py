"""Builders of standard ONNX function ops, by family; importing this registers them all."""

from . import (  # noqa: F401
    activations,
    attention,
    flex_attention,
    generators,
    gradient,
    linear_attention,
    losses,
    ml_linear,
    ml_preprocess,
    ms_activations,
    ms_attention,
    ms_decoder_attention,
    ms_fused,
    ms_gqa,
    ms_nbits,
    ms_norms,
    ms_position_bias,
    ms_quant,
    ms_rotary,
    norms,
    quantize,
    recurrent,
    rotary,
    sequence_conv,
)
from .builder import Builder
from .registry import EXPANSIONS, expansion, expansion_for

__all__ = ["Builder", "EXPANSIONS", "expansion", "expansion_for"]
