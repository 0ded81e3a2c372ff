"""Schemas of the onnxruntime contrib ops (domain ``com.microsoft``) onnxc implements, written from
onnxruntime's ContribOperators.md, in the form of op_schema_table.py: ``(domain, op) -> (attribute kinds,
((since_version, required inputs, required attributes), ...))``. check_node (op_schema.py) applies them.
"""

from __future__ import annotations

MS = "com.microsoft"

CONTRIB: dict[tuple[str, str], tuple[dict[str, str], tuple]] = {
    (MS, "Tokenizer"): ({"mark": "INT", "mincharnum": "INT", "pad_value": "STRING", "separators": "STRINGS",
                         "tokenexp": "STRING"},
                        ((1, ("X",), ("mark", "mincharnum", "pad_value")),)),
    # -- normalizations and activations (passes/expansions/ms_norms.py, ms_activations.py)
    (MS, "SkipLayerNormalization"): ({"epsilon": "FLOAT"}, ((1, ("input", "skip", "gamma"), ()),)),
    (MS, "SkipSimplifiedLayerNormalization"): ({"epsilon": "FLOAT"}, ((1, ("input", "skip", "gamma"), ()),)),
    ("", "SimplifiedLayerNormalization"): ({"axis": "INT", "epsilon": "FLOAT", "stash_type": "INT"},
                                           ((1, ("X", "scale"), ()),)),
    (MS, "LayerNormalization"): ({"axis": "INT", "epsilon": "FLOAT", "stash_type": "INT"},
                                 ((1, ("X", "Scale"), ()),)),
    (MS, "EmbedLayerNormalization"): ({"epsilon": "FLOAT", "mask_index_type": "INT"},
                                      ((1, ("input_ids",), ()),)),
    (MS, "Gelu"): ({}, ((1, ("X",), ()),)),
    (MS, "FastGelu"): ({}, ((1, ("X",), ()),)),
    (MS, "BiasGelu"): ({}, ((1, ("A", "B"), ()),)),
    (MS, "QuickGelu"): ({"alpha": "FLOAT"}, ((1, ("X",), ()),)),
    (MS, "BiasAdd"): ({}, ((1, ("X", "bias", "skip"), ()),)),
    (MS, "BiasSplitGelu"): ({}, ((1, ("X", "bias"), ()),)),
    # -- fused Conv / Gemm / MatMul forms (passes/expansions/ms_fused.py)
    (MS, "FusedConv"): ({"auto_pad": "STRING", "dilations": "INTS", "group": "INT", "kernel_shape": "INTS",
                         "pads": "INTS", "strides": "INTS", "activation": "STRING", "activation_params": "FLOATS"},
                        ((1, ("X", "W"), ()),)),
    (MS, "NhwcFusedConv"): ({"auto_pad": "STRING", "dilations": "INTS", "group": "INT", "kernel_shape": "INTS",
                             "pads": "INTS", "strides": "INTS", "activation": "STRING",
                             "activation_params": "FLOATS"},
                            ((1, ("X", "W"), ()),)),
    (MS, "NhwcConv"): ({"auto_pad": "STRING", "dilations": "INTS", "group": "INT", "kernel_shape": "INTS",
                        "pads": "INTS", "strides": "INTS"},
                       ((1, ("X", "W"), ()),)),
    (MS, "FusedGemm"): ({"alpha": "FLOAT", "beta": "FLOAT", "transA": "INT", "transB": "INT", "activation": "STRING",
                         "activation_alpha": "FLOAT", "activation_beta": "FLOAT", "activation_gamma": "FLOAT"},
                        ((1, ("A", "B"), ()),)),
    (MS, "FusedMatMul"): ({"alpha": "FLOAT", "transA": "INT", "transB": "INT", "transBatchA": "INT",
                           "transBatchB": "INT"}, ((1, ("A", "B"), ()),)),
    (MS, "TransposeMatMul"): ({"alpha": "FLOAT", "transA": "INT", "transB": "INT"}, ((1, ("A", "B"), ()),)),
    (MS, "Inverse"): ({}, ((1, ("X",), ()),)),
    # -- attention (passes/expansions/ms_attention.py)
    (MS, "Attention"): ({"do_rotary": "INT", "mask_filter_value": "FLOAT", "num_heads": "INT",
                         "past_present_share_buffer": "INT", "qkv_hidden_sizes": "INTS",
                         "rotary_embedding_dim": "INT", "scale": "FLOAT", "unidirectional": "INT"},
                        ((1, ("input", "weights"), ("num_heads",)),)),
    (MS, "MultiHeadAttention"): ({"mask_filter_value": "FLOAT", "num_heads": "INT", "scale": "FLOAT",
                                  "unidirectional": "INT"},
                                 ((1, ("query",), ("num_heads",)),)),
    (MS, "RotaryEmbedding"): ({"interleaved": "INT", "is_packed_batching": "INT", "num_heads": "INT",
                               "rotary_embedding_dim": "INT", "scale": "FLOAT"},
                              ((1, ("input", "position_ids", "cos_cache", "sin_cache"), ()),)),
    (MS, "GroupQueryAttention"): ({"causal": "INT", "do_rotary": "INT", "k_norm_epsilon": "FLOAT",
                                   "k_quant_type": "STRING", "kv_cache_bit_width": "INT", "kv_num_heads": "INT",
                                   "local_window_size": "INT", "num_heads": "INT", "q_norm_epsilon": "FLOAT",
                                   "qk_norm_epsilon": "FLOAT", "qk_output": "INT", "rotary_interleaved": "INT",
                                   "scale": "FLOAT", "sliding_window_cache": "INT", "smooth_softmax": "INT",
                                   "softcap": "FLOAT", "v_quant_type": "STRING"},
                                  ((1, ("query",), ("num_heads", "kv_num_heads")),)),
}
