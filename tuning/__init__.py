"""Training data for the served model on the platform's own tools.

    python -m tuning.generate --out steps.jsonl --tasks 400 --seed 1 [--worker URL]
    python -m tuning.rejected --runtime URL --examples steps.jsonl --out pairs.jsonl
    python -m tuning.sampled --runtime URL --out runs.jsonl --tasks 200 --tries 4 [--worker URL]

generate: tasks from domains x wordings x workflows, played by an oracle through the real
agent loop and tool registry against a real worker, kept when the stores' checks pass, one
agent step a line. rejected: wrong actions sampled from a served model on those steps, as
(chosen, rejected) pairs. sampled: steps from runs of a served model that pass the checks.
"""
