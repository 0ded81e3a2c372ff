"""TreeEnsembleRegressor/TreeEnsembleClassifier are kernels (codegen/kernels/trees_classic.py), not expansions."""
