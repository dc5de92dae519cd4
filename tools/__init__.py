"""The tool layer: a registry of typed tools, their handlers (which call the worker and the
runtime over HTTP), and adapters exposing the registry to our agent, MCP clients and Hermes."""
