"""LoRA SFT on agent steps (training/steps.py): a plain loop, loss on the completion only.

Each example is one agent step: the served prompt (system, user, earlier assistant turns and
tool results, all context) and the reply. Labels are -100 everywhere but the reply's tokens,
so the mean next-token NLL that transformers computes covers exactly the reply:

    input_ids: [B, T]  prompt + completion, right-padded
    labels:    [B, T]  -100 over prompt and padding, the token id over the completion

PEFT wraps the model with LoRA on every projection; only the adapters train (AdamW, linear
warm-up then cosine decay). On CUDA the forward runs under bf16 autocast with the weights
and adapters kept in float32. Held-out steps, when given, are scored every `eval_every`
steps, so the report shows whether the loss falls on steps it did not train on.
"""
from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import PreTrainedModel, get_cosine_schedule_with_warmup

from training.hf_model import pick_device
from training.params import SftParams
from training.steps import Example

log = logging.getLogger(__name__)
IGNORE = -100
Progress = Callable[[dict], None]


def lora_config(r: int, alpha: int, dropout: float, targets: list[str]) -> LoraConfig:
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets, task_type="CAUSAL_LM")


def collate(examples: list[Example]) -> dict[str, torch.Tensor]:
    """Right-padded input_ids, attention_mask and labels (the completion only). Padding is
    token 0: masked from attention and loss, its id never matters."""
    width = max(len(e.prompt_ids) + len(e.completion_ids) for e in examples)
    ids = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for i, e in enumerate(examples):
        p, n = len(e.prompt_ids), len(e.prompt_ids) + len(e.completion_ids)
        ids[i, :n] = torch.tensor(e.prompt_ids + e.completion_ids)
        labels[i, p:n] = torch.tensor(e.completion_ids)
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def total_steps(n_examples: int, params: SftParams) -> int:
    if params.max_steps:
        return params.max_steps
    per_epoch = math.ceil(n_examples / (params.batch_size * params.gradient_accumulation_steps))
    return max(1, math.ceil(per_epoch * params.epochs))


def _batches(examples: list[Example], size: int, rng: random.Random, pool: int = 32):
    """Endless shuffled passes over the examples, `size` at a time. Each batch comes from a
    pool of `pool` batches' worth of shuffled examples sorted by length: steps run from a few
    hundred to 4k tokens, and a batch padded to its longest spent most of its time (and its
    attention, which cannot take the flash kernel under a padding mask) on padding."""
    while True:
        order = examples[:]
        rng.shuffle(order)
        batches = []
        for i in range(0, len(order), size * pool):
            chunk = sorted(order[i:i + size * pool], key=len)
            batches += [chunk[j:j + size] for j in range(0, len(chunk), size)]
        rng.shuffle(batches)
        yield from batches


class TrainingDiverged(RuntimeError):
    """Too many steps with a non-finite loss or gradient to go on."""


@dataclass
class SftResult:
    model: PeftModel                       # the base with its trained LoRA adapter, unmerged
    metrics: dict
    history: list[dict] = field(default_factory=list)


def _loss(model, batch: dict, device: str) -> torch.Tensor:
    """Mean NLL of the completion tokens, the loss transformers computes from `labels`, but with
    the output head applied to those positions only: a step is a prompt of 1-3k tokens and a
    reply of tens, and the head over every position (151k-word vocabulary, float32 logits
    under autocast) cost more time and memory than the decoder itself."""
    batch = {k: v.to(device) for k, v in batch.items()}
    net = model.get_base_model() if isinstance(model, PeftModel) else model
    targets = batch["labels"][:, 1:]                 # position t predicts token t + 1
    keep = targets != IGNORE
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
        hidden = net.get_decoder()(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])[0]
        logits = net.get_output_embeddings()(hidden[:, :-1][keep])
    return torch.nn.functional.cross_entropy(logits.float(), targets[keep])


@torch.no_grad()
def evaluate(model, examples: list[Example], batch_size: int, device: str) -> float:
    """Mean completion-token NLL over `examples` (every completion token weighs the same)."""
    model.eval()
    total, tokens = 0.0, 0
    examples = sorted(examples, key=len)       # little padding; the mean does not depend on order
    for i in range(0, len(examples), batch_size):
        chunk = examples[i:i + batch_size]
        n = sum(len(e.completion_ids) for e in chunk)
        total += _loss(model, collate(chunk), device).item() * n
        tokens += n
    model.train()
    return total / max(tokens, 1)


def train_sft(model: PreTrainedModel | PeftModel, examples: list[Example], params: SftParams,
              held_out: list[Example] = (), on_progress: Progress | None = None) -> SftResult:
    """Train a new LoRA adapter on `model` (or go on training the adapter of a PeftModel)."""
    assert examples, "no examples to train on"
    device = pick_device(params.device)
    torch.manual_seed(params.seed)
    if not isinstance(model, PeftModel):
        model = get_peft_model(model, lora_config(params.lora_r, params.lora_alpha, params.lora_dropout,
                                                  params.target_modules))
    model.to(device).train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=params.learning_rate, weight_decay=params.weight_decay)
    steps = total_steps(len(examples), params)
    schedule = get_cosine_schedule_with_warmup(optimizer, min(params.warmup_steps, steps - 1), steps)
    batches = _batches(examples, params.batch_size, random.Random(params.seed))
    every = params.eval_every or max(1, steps // 10)
    history: list[dict] = []
    before = evaluate(model, held_out, params.batch_size, device) if held_out else None
    t0 = time.monotonic()
    skipped: list[int] = []
    for step in range(1, steps + 1):
        losses = []
        for _ in range(params.gradient_accumulation_steps):
            loss = _loss(model, collate(next(batches)), device)
            losses.append(loss.item())
            if not math.isfinite(losses[-1]):
                break
            (loss / params.gradient_accumulation_steps).backward()
        norm = torch.nn.utils.clip_grad_norm_(trainable, params.max_grad_norm) if all(map(math.isfinite, losses)) \
            else torch.tensor(float("nan"))
        if torch.isfinite(norm):
            optimizer.step()
        else:
            # One batch overflowing (bf16) must not turn every adapter weight into NaN, as it
            # did at step ~200 of the first real run: its update is dropped, and counted.
            skipped.append(step)
            if len(skipped) > max(3, steps // 20):
                raise TrainingDiverged(f"SFT: {len(skipped)} of {step} steps had a non-finite loss or gradient "
                                       f"(steps {skipped[:10]}); lower the learning rate")
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        elapsed = time.monotonic() - t0
        event = {"stage": "sft", "step": step, "max_steps": steps, "loss": sum(losses) / len(losses),
                 "lr": schedule.get_last_lr()[0], "elapsed_s": round(elapsed, 2),
                 "eta_s": round(elapsed / step * (steps - step), 1)}
        if held_out and (step % every == 0 or step == steps):
            event["eval_loss"] = evaluate(model, held_out, params.batch_size, device)
        history.append(event)
        if on_progress:
            on_progress(event)
    seconds = time.monotonic() - t0
    metrics = {"steps": steps, "examples": len(examples), "held_out": len(held_out), "device": device,
               "train_seconds": round(seconds, 2), "first_loss": history[0]["loss"], "final_loss": history[-1]["loss"],
               "eval_loss_before": before, "eval_loss_after": history[-1].get("eval_loss"),
               "trainable_parameters": sum(p.numel() for p in trainable), "skipped_steps": skipped}
    log.info("SFT: %d steps on %s in %.1f s; loss %.4f -> %.4f", steps, device, seconds,
             metrics["first_loss"], metrics["final_loss"])
    return SftResult(model, metrics, history)
