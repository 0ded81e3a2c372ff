"""Benchmarks: onnxc vs onnxruntime on a locally built model set (models.py, run.py)."""
