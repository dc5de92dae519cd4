"""The CUDA backend's workbench: check.py (every kernel against the CPU reference), timing.py
(GB/s of the memory-bound kernels), emulator/ (the kernels compiled for the CPU)."""
