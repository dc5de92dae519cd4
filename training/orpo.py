"""ORPO with LoRA through TRL and PEFT: train on preference pairs, return the model with the
adapter merged (a dense model, for export) or unmerged (a PeftModel, to save as an adapter).
Given a PeftModel (the adapter of an SFT run), ORPO goes on training that adapter.

TRL's experimental ORPOTrainer does tokenisation, batching and the forward pass; its odds
ratio term comes from our pure training.loss.orpo_loss. The same pairs are scored before
and after training (trainer.evaluate on the training set), so the reported reward margin
and log-odds change are measured, not read off the noisy per-batch training log.
"""
from __future__ import annotations

import logging
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from datasets import Dataset
from peft import LoraConfig, PeftModel
from transformers import PreTrainedModel, TrainerCallback
from transformers.trainer_callback import PrinterCallback

with warnings.catch_warnings():
    # TRL warns that trl.experimental may change; we pin trl below 2 and test what we use of it
    warnings.filterwarnings("ignore", message="You are importing from 'trl.experimental'")
    from trl.experimental.orpo import ORPOConfig, ORPOTrainer

from training.dataset import PreferencePair, check_lengths
from training.hf_model import pick_device
from training.loss import orpo_loss
from training.params import OrpoParams
from training.steps import spelled

log = logging.getLogger(__name__)
Progress = Callable[[dict], None]


class OrpoTrainer(ORPOTrainer):
    """TRL's trainer with our loss, the runtime's BOS convention, and the replies' tokens the
    base cannot emit spelled as text (`spell`, training.steps.spellings), as SFT spells them."""

    def __init__(self, *args, spell: frozenset[int] = frozenset(), **kwargs):
        self.spell = spell                 # TRL tokenizes the datasets inside __init__
        super().__init__(*args, **kwargs)

    def build_tokenized_answer(self, prompt, answer):
        tokens = super().build_tokenized_answer(prompt, answer)
        if self.spell & set(tokens["input_ids"]):
            tokens["input_ids"] = spelled(self.processing_class, list(tokens["input_ids"]), self.spell)
            tokens["attention_mask"] = [1] * len(tokens["input_ids"])
        return tokens

    def odds_ratio_loss(self, chosen_logps, rejected_logps):
        # TRL's contract: (beta * log sigmoid(log_odds) per pair, chosen rewards, rejected
        # rewards, mean log sigmoid(log_odds), mean log_odds); it subtracts the first from the NLL.
        t = orpo_loss(chosen_logps, rejected_logps, chosen_logps.new_zeros(()), self.beta)
        device = self.accelerator.device
        return (-self.beta * t.odds_ratio_loss, t.chosen_rewards.to(device), t.rejected_rewards.to(device),
                (-t.odds_ratio_loss).mean(), t.log_odds.mean())

    def tokenize_row(self, feature, model=None) -> dict:
        row = super().tokenize_row(feature, model)
        tok = self.processing_class
        # TRL prepends BOS whenever the tokenizer has one; Qwen's doesn't add it when encoding,
        # and the runtime serves prompts as the tokenizer encodes them, so train the same way.
        adds_bos = tok("a")["input_ids"][:1] == [tok.bos_token_id]
        if tok.bos_token_id is None or adds_bos:
            return row
        for prefix in ("prompt_", "chosen_", "rejected_"):
            ids = row.get(prefix + "input_ids")
            if ids and ids[0] == tok.bos_token_id:   # drop position 0 from ids, mask and labels alike
                for key in [k for k in row if k.startswith(prefix)]:
                    row[key] = row[key][1:]
        return row


class ProgressCallback(TrainerCallback):
    """Turns the trainer's logs into progress events: step, loss, reward margin, ETA."""

    def __init__(self, emit: Progress):
        self.emit, self.start = emit, time.monotonic()

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()        # the ETA counts training steps, not the scoring before

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs:
            return
        step, total = state.global_step, state.max_steps
        elapsed = time.monotonic() - self.start
        self.emit({"step": step, "max_steps": total, "loss": logs["loss"],
                   "reward_margin": logs.get("rewards/margins"), "log_odds": logs.get("log_odds_chosen"),
                   "elapsed_s": round(elapsed, 2), "eta_s": round(elapsed / max(step, 1) * (total - step), 1)})


@dataclass
class TrainResult:
    model: PreTrainedModel                 # on the CPU, float32: LoRA merged, or a PeftModel (merge=False)
    metrics: dict
    history: list[dict] = field(default_factory=list)


def _scores(trainer: OrpoTrainer) -> dict:
    m = trainer.evaluate()
    return {"reward_margin": m["eval_rewards/margins"], "log_odds": m["eval_log_odds_chosen"],
            "accuracy": m["eval_rewards/accuracies"], "nll": m["eval_nll_loss"]}


def train_orpo(model: PreTrainedModel | PeftModel, tokenizer, pairs: list[PreferencePair], params: OrpoParams,
               on_progress: Progress | None = None, merge: bool = True,
               spell: frozenset[int] = frozenset()) -> TrainResult:
    """A LoRA adapter trained with ORPO on `pairs` (a new one, or the PeftModel's own),
    merged into `model` unless merge=False; `spell`: reply tokens written as text."""
    check_lengths(pairs, tokenizer, params.max_length)
    device = pick_device(params.device)
    data = Dataset.from_list([p.row() for p in pairs])
    with tempfile.TemporaryDirectory(prefix="orpo-") as out:
        args = ORPOConfig(
            output_dir=out, learning_rate=params.learning_rate, beta=params.beta, max_steps=params.max_steps,
            per_device_train_batch_size=params.batch_size, per_device_eval_batch_size=params.batch_size,
            gradient_accumulation_steps=params.gradient_accumulation_steps, warmup_steps=params.warmup_steps,
            lr_scheduler_type=params.lr_scheduler, weight_decay=params.weight_decay,
            max_length=params.max_length, logging_steps=params.logging_steps, seed=params.seed,
            use_cpu=device == "cpu", bf16=device == "cuda" and torch.cuda.is_bf16_supported(),
            save_strategy="no", report_to=[], disable_tqdm=True, remove_unused_columns=False)
        lora = LoraConfig(r=params.lora_r, lora_alpha=params.lora_alpha, lora_dropout=params.lora_dropout,
                          target_modules=params.target_modules, task_type="CAUSAL_LM")
        history: list[dict] = []

        def record(event: dict) -> None:
            history.append(event)
            if on_progress:
                on_progress(event)

        trainer = OrpoTrainer(model=model, args=args, train_dataset=data, eval_dataset=data,
                              processing_class=tokenizer,
                              peft_config=None if isinstance(model, PeftModel) else lora,
                              callbacks=[ProgressCallback(record)], spell=spell)
        trainer.remove_callback(PrinterCallback)      # progress goes through `record`, not print()
        before = _scores(trainer)
        t0 = time.monotonic()
        trainer.train()
        seconds = time.monotonic() - t0
        after = _scores(trainer)
    trained = trainer.model.merge_and_unload() if merge else trainer.model
    trained = trained.to("cpu", torch.float32)
    metrics = {"before": before, "after": after, "train_seconds": round(seconds, 2), "device": device,
               "steps": trainer.state.global_step, "examples": len(pairs),
               "final_loss": history[-1]["loss"] if history else None}
    log.info("ORPO: %d steps on %s in %.1f s; reward margin %.4f -> %.4f", metrics["steps"], device,
             seconds, before["reward_margin"], after["reward_margin"])
    return TrainResult(trained, metrics, history)
