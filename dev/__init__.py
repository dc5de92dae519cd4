"""The workbench beside the product (as llm.c's dev/cuda): kernel checks against the CPU
reference, kernel timing, the CUDA emulator and the synthetic GGUF writer. Imported by tests/
and benchmarks/ from the repository root, never by the runtime; not installed."""
