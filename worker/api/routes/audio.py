"""OpenAI-shaped speech: POST /speech (text -> WAV/FLAC/PCM) and POST /transcriptions
(multipart audio upload -> text, with segment or word timestamps on request)."""
from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, File, Form, Response, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field

from httpkit.errors import APIError
from worker.deps import SettingsDep, SttDep, TtsDep

router = APIRouter()

STT_MODELS = {"whisper-1", "whisper-base"}


class SpeechRequest(BaseModel):
    input: str = Field(min_length=1, max_length=4096)
    model: str = "piper"
    voice: str = "joe"
    response_format: str = "wav"
    speed: float = Field(1.0, ge=0.25, le=4.0)


@router.post("/speech", response_class=Response,
             responses={200: {"content": {"audio/wav": {}, "audio/flac": {}, "audio/pcm": {}}}})
async def speech(req: SpeechRequest, tts: TtsDep):
    """Synthesize speech (Piper, or espeak-ng when Piper is absent)."""
    data, media_type = await run_in_threadpool(tts.synthesize, req.input, req.voice, req.speed,
                                               req.response_format)
    return Response(data, media_type=media_type, headers={"x-tts-engine": tts.engine})


@router.post("/transcriptions")
async def transcriptions(
    stt: SttDep, settings: SettingsDep,
    file: UploadFile = File(description="audio in any format soundfile reads"),
    model: str = Form("whisper-1"),
    language: str | None = Form(None, max_length=16),
    prompt: str | None = Form(None, max_length=2000),
    response_format: Literal["json", "text", "verbose_json"] = Form("json"),
    temperature: float = Form(0.0, ge=0.0, le=1.0),
    timestamp_granularities: list[Literal["segment", "word"]] = Form(
        default_factory=list, alias="timestamp_granularities[]"),
):
    """Transcribe an uploaded recording with Whisper."""
    if model not in STT_MODELS:
        raise APIError(404, f"unknown transcription model {model!r}; use whisper-1 or whisper-base",
                       code="model_not_found")
    data = await file.read(settings.max_upload_bytes + 1)
    if len(data) > settings.max_upload_bytes:
        raise APIError(413, f"the upload is over {settings.max_upload_bytes} bytes", code="payload_too_large")
    words = "word" in timestamp_granularities
    result = await run_in_threadpool(stt.transcribe, data, file.filename or "upload", language or None,
                                     prompt, temperature, words)
    if response_format == "text":
        return PlainTextResponse(result["text"])
    if response_format == "json":
        return {"text": result["text"]}
    if words:
        result["words"] = [w for s in result["segments"] for w in s.get("words", [])]
    return {"task": "transcribe", **result}
