"""Gold agent trajectories for tuning the served model on the platform's own tools: tasks
built from domains x wordings x workflows, played through the real agent loop and tool
registry against a real worker by an oracle model, checked against the stores."""
