"""Export a torch.nn.Module to ONNX with either of PyTorch's exporters, with dynamic dims.

``legacy``: ``torch.onnx.export(..., dynamo=False)`` (TorchScript tracing, ``dynamic_axes``).
``dynamo``: ``torch.onnx.export(..., dynamo=True)`` (torch.export, ``dynamic_shapes``), weights kept in
the one file. Both take the same description of which input dims are dynamic: ``{input: {axis: name}}``.
"""

from __future__ import annotations

import io
import warnings

EXPORTERS = ("legacy", "dynamo")
OPSET = 18


def export(module, args: tuple, input_names: list[str], output_names: list[str],
           dynamic: dict[str, dict[int, str]], exporter: str) -> bytes:
    """The ONNX bytes of ``module`` traced on ``args`` (eval mode, no grad)."""
    import torch

    module = module.eval()
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "legacy":
            axes = {**dynamic, **{o: {0: "batch"} for o in output_names if o not in dynamic}}
            torch.onnx.export(module, args, buf, input_names=input_names, output_names=output_names,
                              dynamic_axes=axes, opset_version=17, dynamo=False)
            return buf.getvalue()
        if exporter != "dynamo":
            raise ValueError(f"unknown exporter {exporter!r}; known: {', '.join(EXPORTERS)}")
        dims: dict[str, object] = {}
        shapes = []
        for name in input_names:
            spec = {}
            for axis, dim in dynamic.get(name, {}).items():
                dims.setdefault(dim, torch.export.Dim(dim, min=1, max=4096))
                spec[axis] = dims[dim]
            shapes.append(spec or None)
        prog = torch.onnx.export(module, args, input_names=input_names, output_names=output_names,
                                 dynamic_shapes=tuple(shapes), opset_version=OPSET, dynamo=True,
                                 optimize=True, verbose=False)
        return prog.model_proto.SerializeToString()
