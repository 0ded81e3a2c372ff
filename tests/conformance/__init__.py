"""The ONNX backend conformance suite: every node and model case of the pinned onnx package."""
