"""The engine: sequences, KV blocks, scheduler, model runner, LLMEngine."""
