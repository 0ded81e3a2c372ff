"""The pass contract: a pass takes a model and returns it with a flag saying whether it changed."""

from __future__ import annotations

from dataclasses import dataclass

from onnxc.ir import Model


@dataclass
class PassResult:
    model: Model
    changed: bool
