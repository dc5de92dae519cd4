"""Audio in and out: decode any format soundfile reads (WAV, FLAC, OGG, MP3 ...) to 16 kHz
mono float32 for Whisper, and encode synthesized samples as WAV, FLAC or raw PCM.

The header is read first (sf.info), so an upload that is not audio, or one longer than the
limit, is refused before any samples are decoded.
"""
from __future__ import annotations

import io
from math import gcd

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly

from httpkit.errors import APIError

WHISPER_RATE = 16_000
FORMATS = {"wav": "audio/wav", "flac": "audio/flac", "pcm": "audio/pcm"}


def _not_audio(name: str, e: Exception) -> APIError:
    return APIError(400, f"{name}: not audio that soundfile can read (WAV, FLAC, OGG, MP3 ...): {e}")


def decode(data: bytes, name: str, max_seconds: float, rate: int = WHISPER_RATE) -> np.ndarray:
    """[n] float32 mono samples at `rate`."""
    if not data:
        raise APIError(400, f"{name}: the file is empty")
    try:
        info = sf.info(io.BytesIO(data))
    except (sf.LibsndfileError, RuntimeError, ValueError, TypeError, EOFError) as e:
        raise _not_audio(name, e) from e
    if info.samplerate <= 0 or info.frames <= 0:
        raise APIError(400, f"{name}: the audio holds no samples")
    if info.frames / info.samplerate > max_seconds:
        raise APIError(413, f"{name}: {info.frames / info.samplerate:.0f} s of audio is over "
                            f"the {max_seconds:g} s limit", code="payload_too_large")
    try:
        samples, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, ValueError, TypeError, EOFError) as e:
        raise _not_audio(name, e) from e
    mono = np.nan_to_num(samples.mean(axis=1))
    if sr != rate:
        g = gcd(sr, rate)
        mono = resample_poly(mono, rate // g, sr // g).astype(np.float32)
    return mono.astype(np.float32)


def encode(samples: np.ndarray, rate: int, fmt: str) -> bytes:
    """16-bit audio in `fmt` (a key of FORMATS); samples are floats in [-1, 1]."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype(np.int16)
    if fmt == "pcm":
        return pcm.tobytes()
    buf = io.BytesIO()
    sf.write(buf, pcm, rate, format=fmt.upper(), subtype="PCM_16")
    return buf.getvalue()
