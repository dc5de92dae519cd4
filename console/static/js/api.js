// Requests to the console's own server: /api (console endpoints), /runtime and /worker (the
// stack's APIs, forwarded). Off loopback the server wants the API key: the page asks for it
// once and keeps it in sessionStorage, never in a cookie (so no other site can send it).

const KEY = "samevm.key";

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function headers(extra = {}) {
  const key = sessionStorage.getItem(KEY);
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

let asking = null;                 // requests refused at once share one dialog

function askKey() {
  asking ??= new Promise((resolve) => {
    const dialog = document.getElementById("key-dialog");
    const input = document.getElementById("key-input");
    input.value = "";
    dialog.addEventListener("close", () => {
      if (input.value) sessionStorage.setItem(KEY, input.value);
      asking = null;
      resolve();
    }, { once: true });
    dialog.showModal();
  });
  return asking;
}

// The error text of an OpenAI-style, worker-style or FastAPI-style error body.
export function errorText(body, status) {
  if (body && typeof body === "object") {
    const e = body.error ?? body.detail;
    if (typeof e === "string") return e;
    if (Array.isArray(e)) return e.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).join("; ");
    if (e && e.message) return e.message;
  }
  return `HTTP ${status}`;
}

// fetch with the key; on 401 ask for the key and try once more. Returns the Response.
export async function send(path, { method = "GET", json, body, signal, accept } = {}) {
  for (let attempt = 0; ; attempt++) {
    const h = headers(accept ? { Accept: accept } : {});
    let payload = body;
    if (json !== undefined) { h["Content-Type"] = "application/json"; payload = JSON.stringify(json); }
    const r = await fetch(path, { method, headers: h, body: payload, signal });
    if (r.status === 401 && attempt === 0) { await askKey(); continue; }
    if (!r.ok) {
      let parsed = null;
      try { parsed = await r.json(); } catch { /* not JSON */ }
      throw new ApiError(r.status, errorText(parsed, r.status));
    }
    return r;
  }
}

export async function api(path, options = {}) {
  const r = await send(path, options);
  const text = await r.text();
  return text ? JSON.parse(text) : {};
}

async function* lines(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let i;
    while ((i = buffer.indexOf("\n")) >= 0) {
      yield buffer.slice(0, i).replace(/\r$/, "");
      buffer = buffer.slice(i + 1);
    }
  }
  if (buffer) yield buffer;
}

// Server-sent events over fetch (EventSource cannot send the key): yields {event, data, id}.
export async function* events(path, options = {}) {
  const r = await send(path, { ...options, accept: "text/event-stream" });
  let current = {};
  for await (const line of lines(r)) {
    if (line === "") {
      if (current.data !== undefined) yield current;
      current = {};
    } else if (!line.startsWith(":")) {
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
      current[field] = field === "data" && current.data !== undefined ? current.data + "\n" + value : value;
    }
  }
  if (current.data !== undefined) yield current;
}

// Newline-delimited JSON: yields each parsed line.
export async function* ndjson(path, options = {}) {
  const r = await send(path, options);
  for await (const line of lines(r)) if (line.trim()) yield JSON.parse(line);
}

// Upload a form with progress (fetch has no upload progress): onProgress(fraction).
export function upload(path, form, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    const key = sessionStorage.getItem(KEY);
    if (key) xhr.setRequestHeader("Authorization", `Bearer ${key}`);
    xhr.upload.onprogress = (e) => { if (e.lengthComputable) onProgress(e.loaded / e.total); };
    xhr.upload.onload = () => onProgress(1);
    xhr.onload = () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else reject(new ApiError(xhr.status, errorText(body, xhr.status)));
    };
    xhr.onerror = () => reject(new ApiError(0, "the upload failed (network)"));
    xhr.send(form);
  });
}
