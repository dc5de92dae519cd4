"""Speech through the HTTP routes: Piper TTS -> Whisper STT round trip (word error rate
reported), other formats and sample rates, the espeak-ng fallback, and refusals."""
from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import resample_poly

from worker.speech import piper_available, word_error_rate

pytestmark = pytest.mark.skipif(not piper_available(), reason="the speech extra is not installed")

SENTENCE = "The library opens early and closes after the evening lecture."


def wer(reference: str, hypothesis: str) -> float:
    return word_error_rate([reference], [hypothesis])


def transcribe(client, data: bytes, name: str, **form):
    return client.post("/v1/audio/transcriptions", files={"file": (name, data)}, data=form)


@pytest.fixture(scope="module")
def speech_client(tmp_path_factory, embedder):
    from fastapi.testclient import TestClient

    from worker.main import create_app
    from worker.settings import WorkerSettings
    home = tmp_path_factory.mktemp("speech-home")
    with TestClient(base_url="http://127.0.0.1", app=create_app(WorkerSettings(home=home, runtime_url=None), embedder=embedder)) as c:
        yield c


@pytest.fixture(scope="module")
def spoken(speech_client) -> bytes:
    r = speech_client.post("/v1/audio/speech", json={"model": "piper", "input": SENTENCE, "voice": "joe"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav" and r.headers["x-tts-engine"] == "piper"
    return r.content


def test_tts_then_stt_round_trip(speech_client, spoken, record_property):
    samples, rate = sf.read(io.BytesIO(spoken))
    assert rate == 22_050 and 2.0 < len(samples) / rate < 10.0 and np.abs(samples).max() > 0.1
    r = transcribe(speech_client, spoken, "speech.wav", model="whisper-1")
    assert r.status_code == 200, r.text
    error = wer(SENTENCE, r.json()["text"])
    record_property("round_trip_wer", error)
    print(f"round trip WER {error:.3f}: {r.json()['text']!r}")
    assert error <= 0.1


def test_other_formats_rates_and_word_timestamps(speech_client, spoken):
    samples, rate = sf.read(io.BytesIO(spoken), dtype="float32")
    stereo_44k = np.stack([resample_poly(samples, 2, 1)] * 2, axis=1)   # 44.1 kHz, two channels
    flac = io.BytesIO()
    sf.write(flac, stereo_44k, 44_100, format="FLAC")
    r = transcribe(speech_client, flac.getvalue(), "speech.flac", response_format="verbose_json",
                   **{"timestamp_granularities[]": "word"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert wer(SENTENCE, body["text"]) <= 0.1 and body["language"] == "en"
    assert abs(body["duration"] - len(samples) / rate) < 0.1
    words = body["words"]
    assert [w["word"].strip(".,").lower() for w in words][:3] == ["the", "library", "opens"]
    assert all(a["start"] <= b["start"] for a, b in zip(words, words[1:])) and words[-1]["end"] <= body["duration"] + 0.5
    text = transcribe(speech_client, spoken, "speech.wav", response_format="text")
    assert text.headers["content-type"].startswith("text/plain") and "library" in text.text.lower()


def test_speech_formats_and_refusals(speech_client):
    flac = speech_client.post("/v1/audio/speech", json={"input": "Hello there.", "response_format": "flac",
                                                        "voice": "alloy", "speed": 1.5})
    assert flac.status_code == 200 and sf.info(io.BytesIO(flac.content)).format == "FLAC"
    for body, words in (({"input": "hi", "voice": "darth"}, "unsupported voice"),
                        ({"input": "hi", "response_format": "mp3"}, "unsupported response_format"),
                        ({"input": "   "}, "empty")):
        r = speech_client.post("/v1/audio/speech", json=body)
        assert r.status_code == 400 and words in r.json()["error"]["message"], r.text
    for data, name in ((b"definitely not audio", "x.wav"), (b"", "empty.wav"), (b"RIFF\x00\x00", "cut.wav")):
        r = transcribe(speech_client, data, name)
        assert r.status_code == 400, r.text
    silent = io.BytesIO()
    sf.write(silent, np.zeros(16_000, np.float32), 16_000, format="WAV")
    assert transcribe(speech_client, silent.getvalue(), "s.wav", language="xx").status_code == 400
    assert transcribe(speech_client, silent.getvalue(), "s.wav", model="gpt-4o").status_code == 404


def test_long_audio_is_refused_before_decoding(make_client):
    client = make_client(max_audio_seconds=1.0)
    wav = io.BytesIO()
    sf.write(wav, np.zeros(3 * 16_000, np.float32), 16_000, format="WAV")
    r = transcribe(client, wav.getvalue(), "long.wav")
    assert r.status_code == 413 and "limit" in r.json()["error"]["message"]


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="Debian espeak-ng is not installed")
def test_espeak_fallback(make_client, speech_client):
    client = make_client(tts_engine="espeak")
    r = client.post("/v1/audio/speech", json={"input": "Good morning, everyone.", "voice": "joe"})
    assert r.status_code == 200 and r.headers["x-tts-engine"] == "espeak"
    samples, rate = sf.read(io.BytesIO(r.content))
    assert rate == 22_050 and len(samples) / rate > 0.5
    heard = transcribe(speech_client, r.content, "espeak.wav").json()["text"]
    assert wer("Good morning, everyone.", heard) <= 0.34, heard
