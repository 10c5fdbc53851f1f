"""An independent float64 recomputation of dumped sextant cases (recheck_dump.py).

Written from the math in numpy, sharing no code with the C++ kernels or the
C++ float64 reference (reference/), so that a bug in either shows as a
difference between this package and sextant's `.ref` tensors.

ops.py        LayerNorm, GELU (tanh form), cross-entropy
attention.py  softmax attention forward and backward: GQA, causal, offsets, packed sequences
moe.py        the MoE layer: router, top-k, capacity, GELU experts, aux and z losses
cases.py      which dumped cases are covered, and their tensors recomputed from the dump
"""
