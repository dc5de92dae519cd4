"""The `speech` toolset: text to a WAV file and a recording to text, through the worker
(POST /v1/audio/speech and /v1/audio/transcriptions).

Audio files live in the stack's data directory (<home>/audio): `tts` writes there, and
`stt` reads only files under the data directory, so a model cannot make the stack read
arbitrary files."""
from __future__ import annotations

import hashlib
import io
import wave
from pathlib import Path

from tools.context import ToolContext, ToolError
from tools.registry import Registry


def audio_dir(ctx: ToolContext) -> Path:
    path = Path(ctx.home) / "audio"
    path.mkdir(parents=True, exist_ok=True)
    return path


def inside_home(ctx: ToolContext, path: str) -> Path:
    """`path` (relative paths are taken from <home>/audio) resolved, if it is under home."""
    home = Path(ctx.home).resolve()
    candidate = Path(path).expanduser()
    resolved = (candidate if candidate.is_absolute() else audio_dir(ctx) / candidate).resolve()
    if not resolved.is_relative_to(home):
        raise ToolError(f"{path}: only files in the data directory {home} can be read")
    if not resolved.is_file():
        raise ToolError(f"{path}: no such file")
    return resolved


def register(registry: Registry) -> None:
    @registry.tool(toolset="speech")
    def tts(ctx: ToolContext, text: str, voice: str = "joe") -> dict:
        """Speak a text aloud into a WAV file in the data directory; returns its path and length.

        Args:
            text: what to say
            voice: the voice to speak with
        """
        r = ctx.send("POST", ctx.worker_url + "/v1/audio/speech",
                     json={"input": text, "voice": voice, "response_format": "wav"})
        name = hashlib.sha1(f"{voice}\n{text}".encode()).hexdigest()[:12]
        path = audio_dir(ctx) / f"tts-{name}.wav"
        path.write_bytes(r.content)
        with wave.open(io.BytesIO(r.content)) as w:
            seconds = w.getnframes() / w.getframerate()
        return {"path": str(path), "seconds": round(seconds, 2), "bytes": len(r.content),
                "engine": r.headers.get("x-tts-engine")}

    @registry.tool(toolset="speech")
    def stt(ctx: ToolContext, path: str, language: str | None = None) -> dict:
        """Transcribe a recording (WAV, FLAC, OGG) from the data directory into text.

        Args:
            path: the audio file, as tts returned it or relative to the audio folder
            language: two-letter language code, if known
        """
        file = inside_home(ctx, path)
        form = {"model": "whisper-1", **({"language": language} if language else {})}
        with file.open("rb") as f:
            result = ctx.request("POST", ctx.worker_url + "/v1/audio/transcriptions", data=form,
                                 files={"file": (file.name, f, "application/octet-stream")})
        return {"text": result["text"].strip(), "path": str(file)}
