"""HTTP plumbing shared by the runtime's and the worker's loopback services."""
