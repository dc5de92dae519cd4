"""samevm text runtime: GGUF models, the paged-KV engine, CPU and CUDA backends, the server."""
