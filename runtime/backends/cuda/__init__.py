"""The CUDA backend: CuPy plus our kernels (kernels/*.cu), no torch. See ops.py."""
from runtime.backends.cuda.ops import CUDAOps

__all__ = ["CUDAOps"]
