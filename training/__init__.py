"""ORPO fine-tuning of the served model, and the hand-over of its result to the runtime.

    dataset.py    preference pairs (TRL's formats), validated with line numbers
    loss.py       the ORPO objective as a pure function (what the trainer uses)
    params.py     hyperparameters and their small-model defaults
    hf_model.py   the trainable HF form of a GGUF
    orpo.py       TRL's ORPOTrainer + LoRA (PEFT), merged into dense weights
    export.py     dense weights -> GGUF (F16, Q8_0) shaped like the base file
    revisions.py  one directory per trained revision; served / last known good
    promote.py    the runtime's /admin/reload and /admin/revisions
    pipeline.py   all of the above in order, for the job runner, the CLI and the demo
    jobs.py       jobs in subprocesses (runner.py), persisted, one at a time

torch, transformers, TRL and PEFT are imported only by the modules that train or export,
so the worker can import jobs.py (and its routes) without paying for them.
"""
