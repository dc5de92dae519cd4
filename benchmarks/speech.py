"""Speech through the worker's services: TTS and STT real-time factors and the round-trip
word error rate (Piper -> Whisper) on the sentences of a text file (one per line).

    python benchmarks/speech.py [benchmarks/data/speech_sentences.txt]

Real-time factor = processing seconds / audio seconds (below 1 is faster than real time).
Model loads are timed apart, after which each sentence is synthesized (Piper and, when
installed, espeak-ng) and the Piper audio transcribed by Whisper base (int8, beam 5).
Writes benchmarks/results/speech.json.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.provenance import commit as head_commit  # noqa: E402

import soundfile as sf  # noqa: E402

from worker.speech import Stt, Tts, word_error_rate  # noqa: E402


def spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4)}


def synthesize_all(tts: Tts, sentences: list[str]) -> tuple[list[bytes], list[float], list[float]]:
    wavs, rtfs, durations = [], [], []
    for s in sentences:
        t0 = time.perf_counter()
        wav, _ = tts.synthesize(s, "joe", 1.0, "wav")
        took = time.perf_counter() - t0
        info = sf.info(io.BytesIO(wav))
        wavs.append(wav)
        durations.append(info.frames / info.samplerate)
        rtfs.append(took / durations[-1])
    return wavs, rtfs, durations


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sentences", type=Path, nargs="?", default=ROOT / "benchmarks" / "data" / "speech_sentences.txt")
    p.add_argument("--home", type=Path, default=ROOT / ".samevm")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "speech.json")
    args = p.parse_args()
    sentences = [line.strip() for line in args.sentences.read_text().splitlines() if line.strip()]

    piper, stt = Tts("piper", args.home, 10_000), Stt(args.home, 600)
    t0 = time.perf_counter()
    piper.voice.get()
    piper_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    stt.model.get()
    whisper_load = time.perf_counter() - t0

    wavs, tts_rtf, durations = synthesize_all(piper, sentences)
    heard, stt_rtf = [], []
    for wav, seconds in zip(wavs, durations):
        t0 = time.perf_counter()
        heard.append(stt.transcribe(wav, "tts.wav", language="en")["text"])
        stt_rtf.append((time.perf_counter() - t0) / seconds)
    per_sentence = [{"text": s, "heard": h, "audio_s": round(d, 3), "wer": round(word_error_rate([s], [h]), 4)}
                    for s, h, d in zip(sentences, heard, durations)]
    report = {
        "benchmark": "speech", "sentences": len(sentences), "sentences_file": str(args.sentences),
        "load_seconds": {"piper": round(piper_load, 3), "whisper_base": round(whisper_load, 3)},
        "tts_piper_rtf": spread(tts_rtf), "stt_whisper_base_int8_rtf": spread(stt_rtf),
        "round_trip_wer": round(word_error_rate(sentences, heard), 4),
        "exact_transcripts": sum(s["wer"] == 0 for s in per_sentence),
        "audio_seconds_total": round(sum(durations), 2),
    }
    if shutil.which("espeak-ng"):
        espeak_wavs, espeak_rtf, espeak_durations = synthesize_all(Tts("espeak", args.home, 10_000), sentences)
        espeak_heard = [stt.transcribe(w, "espeak.wav", language="en")["text"] for w in espeak_wavs]
        report["tts_espeak_rtf"] = spread(espeak_rtf)
        report["round_trip_wer_espeak"] = round(word_error_rate(sentences, espeak_heard), 4)
    else:
        report["tts_espeak_rtf"] = "not measured: Debian espeak-ng is not installed"
    report |= {
        "per_sentence": per_sentence,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_at_end": os.getloadavg()},
        "versions": {m: version(m) for m in ("piper-tts", "faster-whisper", "ctranslate2", "onnxruntime")},
        "git_commit": head_commit(short=False),
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k not in ("per_sentence",)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
