"""samevm: an agent, its model and all of its tools on one machine.

This package is the composition root only: the CLI, the settings, and the supervisor that
starts the runtime and worker processes.
"""
__version__ = "0.1.0"
