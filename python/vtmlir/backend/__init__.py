"""Backends: from the graph level (linalg-on-tensors) to runnable code.

`bufferize` is shared: both the CPU and the CUDA path start from the same bufferized kernel-level IR.
"""
