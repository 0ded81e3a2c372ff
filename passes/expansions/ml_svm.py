"""ai.onnx.ml SVMClassifier and SVMRegressor need no expansion: they have kernels of their own
(codegen/kernels/svm.py). As MatMul/Exp/... graphs the RBF kernel would be ``|x|^2 - 2 x.sv + |sv|^2``,
whose cancellation can flip one-vs-one votes near a boundary, and the votes with onnxruntime's
tie-breaking, the Platt coupling iteration and the binary label rules do not map onto standard ops.
"""
