// Chat: plain chat streamed from the runtime's OpenAI API, with the model's tool calls run
// through the console's tool endpoint and fed back; or one turn of the agent loop
// (agents.loop on the server). The conversation is kept in localStorage, so a reload of
// the page shows it again and the next message continues it.

import { api, events } from "./api.js";
import { $, awarenessText, h, pretty } from "./dom.js";
import { listRevisions, servable, serveRevision } from "./revisions.js";

const STORE = "samevm.chat";
const SETTINGS = "samevm.chat.settings";
const MAX_STEPS = 6;               // model requests per plain-chat turn (each tool round is one)
const RESULT_CHARS = 4000;         // a tool result is cut to this for the model
const DEFAULT_TOOLSETS = ["runtime", "sql", "rag", "memory"];

let state = load();
let tools = [];                    // [{name, toolset, schema}]
let abort = null;
const views = new Map();           // entry -> its <li>

function fresh() {
  return { id: `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`, entries: [], history: [] };
}

function load() {
  try { return JSON.parse(localStorage.getItem(STORE)) || fresh(); } catch { return fresh(); }
}

function save() { localStorage.setItem(STORE, JSON.stringify(state)); }

function settings() {
  return {
    model: $("chat-model").value,
    choice: $("chat-choice").value,
    maxTokens: Number($("chat-max-tokens").value) || 256,
    temperature: Number($("chat-temperature").value) || 0,
    agent: $("chat-agent").checked,
    toolsets: [...$("chat-toolsets").querySelectorAll("input:checked")].map((i) => i.value),
  };
}

function saveSettings() {
  const s = settings();
  localStorage.setItem(SETTINGS, JSON.stringify({ choice: s.choice, maxTokens: s.maxTokens, temperature: s.temperature,
    agent: s.agent, toolsets: s.toolsets }));
}

function offered(s) {
  const named = tools.find((t) => t.name === s.choice);
  return tools.filter((t) => s.toolsets.includes(t.toolset) || t === named).map((t) => t.schema);
}

// ---- rendering -----------------------------------------------------------------------
function callView(part) {
  const args = typeof part.arguments === "string" ? part.arguments : JSON.stringify(part.arguments);
  const verdict = part.result === null ? "running…" : part.result.ok ? "ok" : "failed";
  const details = h("details", { class: `call ${verdict === "failed" ? "failed" : ""}`, open: part.open || false,
    ontoggle: (e) => { part.open = e.target.open; save(); } },
    h("summary", {}, h("span", { class: "tool-name" }, part.name), h("code", { class: "args" }, `(${args})`),
      h("span", { class: `badge ${verdict}` }, verdict)),
    h("h4", {}, "Arguments"), h("pre", {}, pretty(part.arguments)),
    h("h4", {}, "Result"), h("pre", { class: "result" }, part.result === null ? "…" : pretty(part.result)));
  return details;
}

function entryView(entry) {
  if (entry.role === "user") {
    return h("li", { class: "msg user" }, h("span", { class: "who" }, "You"), h("div", { class: "text" }, entry.text));
  }
  const parts = entry.parts.map((p) =>
    p.type === "call" ? callView(p) : p.type === "note" ? h("p", { class: "note" }, p.text)
      : h("div", { class: "text" }, p.text));
  const meta = [entry.mode === "agent" ? "agent loop" : "chat", entry.model, entry.revision && `revision ${entry.revision}`]
    .filter(Boolean).join(" · ");
  return h("li", { class: `msg assistant ${entry.error ? "error" : ""}` },
    h("span", { class: "who" }, "Model"), h("span", { class: "meta" }, meta),
    parts, entry.pending ? h("p", { class: "muted pending" }, "generating…") : null,
    entry.error ? h("p", { class: "error-text", role: "alert" }, entry.error) : null,
    entry.callErrors?.length ? h("p", { class: "note" }, `calls the server refused: ${entry.callErrors.join("; ")}`) : null,
    entry.awareness ? h("p", { class: "awareness", title: "the runtime's uncertainty summary (samevm.awareness)" },
      "Uncertainty: ", awarenessText(entry.awareness)) : null);
}

function draw(entry) {
  const li = entryView(entry);
  const old = views.get(entry);
  if (old) old.replaceWith(li); else $("chat-log").append(li);
  views.set(entry, li);
  li.scrollIntoView({ block: "end" });
}

function drawAll() {
  $("chat-log").replaceChildren();
  views.clear();
  state.entries.forEach(draw);
}

// ---- one plain-chat turn: stream, run calls, feed results back, until an answer -------
async function chatTurn(entry, s, signal) {
  const schemas = offered(s);
  for (let step = 0; step < MAX_STEPS; step++) {
    const body = { model: s.model, messages: state.history, stream: true, max_tokens: s.maxTokens, temperature: s.temperature };
    if (schemas.length && s.choice !== "none") {
      const first = s.choice === "auto" || s.choice === "required" ? s.choice : { type: "function", function: { name: s.choice } };
      body.tools = schemas;
      body.tool_choice = step === 0 ? first : "auto";     // a forced first call, then the model decides
    }
    const text = { type: "text", text: "" };
    entry.parts.push(text);
    const calls = [];
    for await (const ev of events("/runtime/v1/chat/completions", { method: "POST", json: body, signal })) {
      if (ev.data === "[DONE]") break;
      const chunk = JSON.parse(ev.data);
      if (chunk.error) throw new Error(chunk.error.message);
      const delta = chunk.choices?.[0]?.delta || {};
      if (delta.content) { text.text += delta.content; draw(entry); }
      for (const tc of delta.tool_calls || []) {
        const c = (calls[tc.index] ??= { id: "", name: "", arguments: "" });
        if (tc.id) c.id = tc.id;
        if (tc.function?.name) c.name += tc.function.name;
        if (tc.function?.arguments) c.arguments += tc.function.arguments;
      }
      if (chunk.samevm) {
        entry.awareness = chunk.samevm.awareness;
        entry.revision = chunk.samevm.revision;
        entry.callErrors = chunk.samevm.tool_call_errors;
      }
    }
    if (!text.text) entry.parts.pop();
    const message = { role: "assistant", content: text.text };
    if (calls.length) message.tool_calls = calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
    state.history.push(message);
    if (!calls.length) return;
    for (const c of calls) {
      const part = { type: "call", id: c.id, name: c.name, arguments: c.arguments, result: null };
      entry.parts.push(part);
      draw(entry);
      part.result = await api("/api/tools/call", { method: "POST", json: { name: c.name, arguments: c.arguments }, signal });
      state.history.push({ role: "tool", tool_call_id: c.id, name: c.name, content: JSON.stringify(part.result).slice(0, RESULT_CHARS) });
      draw(entry);
      save();
    }
  }
  entry.parts.push({ type: "note", text: `stopped after ${MAX_STEPS} model requests` });
}

// ---- one agent-loop turn (the server runs the loop and returns the turn) ----------------
async function agentTurn(entry, s, userText) {
  const turn = await api("/api/agent/turn", { method: "POST", json: {
    conversation: state.id, message: userText, toolsets: s.toolsets, max_tokens: s.maxTokens, temperature: s.temperature } });
  for (const step of turn.steps) {
    for (const c of step.calls) entry.parts.push({ type: "call", id: c.id, name: c.name, arguments: c.arguments, result: c.result });
    if (step.kind !== "calls" && step.kind !== "answer") entry.parts.push({ type: "note", text: `step ${step.number}: ${step.kind}${step.observation ? ` (${step.observation})` : ""}` });
  }
  const last = turn.steps[turn.steps.length - 1];
  entry.awareness = last?.awareness;
  entry.parts.push({ type: "text", text: turn.answer ?? `(no answer: the loop stopped at ${turn.stop})` });
  state.history.push({ role: "assistant", content: turn.answer ?? "" });
}

async function send(userText) {
  const s = settings();
  saveSettings();
  state.entries.push({ role: "user", text: userText });
  draw(state.entries[state.entries.length - 1]);
  const entry = { role: "assistant", mode: s.agent ? "agent" : "chat", model: s.model, parts: [], pending: true };
  state.entries.push(entry);
  state.history.push({ role: "user", content: userText });
  draw(entry);
  abort = new AbortController();
  $("chat-stop").disabled = false;
  $("chat-send").disabled = true;
  try {
    if (s.agent) await agentTurn(entry, s, userText);
    else await chatTurn(entry, s, abort.signal);
  } catch (e) {
    entry.error = e.name === "AbortError" ? "stopped" : e.message;
  } finally {
    entry.pending = false;
    abort = null;
    $("chat-stop").disabled = true;
    $("chat-send").disabled = false;
    draw(entry);
    save();
  }
}

// ---- settings: models, toolsets, tool choice --------------------------------------------
export async function refreshModels() {
  const models = await api("/runtime/v1/models");
  const select = $("chat-model");
  const current = select.value;
  select.replaceChildren(...models.data.map((m) => h("option", { value: m.id }, m.id)));
  if (models.data.some((m) => m.id === current)) select.value = current;
  const card = models.data.find((m) => m.id === select.value) || models.data[0];
  $("chat-card").textContent = card ? `${card.backend} · context ${card.context_length}` : "";
  await refreshRevisions(card);
  return models.data;
}

// The revision picker: what serves now, and the earlier revisions it can switch to (a
// reload, which the runtime checks before it swaps; requests already running finish first).
async function refreshRevisions(card) {
  const select = $("chat-revision");
  let revisions = [];
  try {
    revisions = servable(await listRevisions());
  } catch {
    revisions = [];                        // /admin is not ours to read: show only what serves
  }
  if (card && !revisions.some((r) => r.revision === card.revision)) revisions.unshift({ revision: card.revision });
  select.replaceChildren(...revisions.map((r) => h("option", { value: r.revision },
    r.revision === card?.revision ? `${r.revision} (serving)` : r.revision)));
  if (card) select.value = card.revision;
  select.onchange = async () => {
    const rev = revisions.find((r) => r.revision === select.value);
    if (!rev?.path || !confirm(`Serve revision ${rev.revision} instead of ${card.revision}?`)) { select.value = card.revision; return; }
    select.disabled = true;
    try {
      await serveRevision(rev);            // announces the change: the pickers refresh
    } catch (e) {
      alert(`reload refused: ${e.message}`);
      select.value = card.revision;
    } finally {
      select.disabled = false;
    }
  };
}

function fillChoices(saved) {
  const select = $("chat-choice");
  const keep = saved ?? select.value;
  const chosen = settings().toolsets;
  [...select.querySelectorAll("option[data-tool]")].forEach((o) => o.remove());
  for (const t of tools.filter((t) => chosen.includes(t.toolset))) {
    select.append(h("option", { value: t.name, "data-tool": "1" }, `call ${t.name}`));
  }
  select.value = [...select.options].some((o) => o.value === keep) ? keep : "auto";
}

async function loadTools(saved) {
  const data = await api("/api/tools");
  tools = data.tools;
  const chosen = saved.toolsets ?? DEFAULT_TOOLSETS;
  const box = $("chat-toolsets");
  box.querySelectorAll("label").forEach((l) => l.remove());
  for (const name of data.toolsets) {
    const names = tools.filter((t) => t.toolset === name).map((t) => t.name).join(", ");
    box.append(h("label", { class: "check", title: names },
      h("input", { type: "checkbox", value: name, checked: chosen.includes(name), onchange: () => { fillChoices(); saveSettings(); } }), ` ${name}`));
  }
  fillChoices(saved.choice);
}

export async function initChat() {
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(SETTINGS)) || {}; } catch { /* defaults */ }
  if (saved.maxTokens) $("chat-max-tokens").value = saved.maxTokens;
  if (saved.temperature !== undefined) $("chat-temperature").value = saved.temperature;
  $("chat-agent").checked = Boolean(saved.agent);
  drawAll();
  $("chat-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("chat-input").value.trim();
    if (!text || abort) return;
    $("chat-input").value = "";
    send(text);
  });
  $("chat-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("chat-form").requestSubmit(); }
  });
  $("chat-stop").addEventListener("click", () => abort?.abort());
  $("chat-new").addEventListener("click", async () => {
    const old = state.id;
    state = fresh();
    save();
    drawAll();
    await api(`/api/agent/${old}`, { method: "DELETE" }).catch(() => {});
    $("chat-input").focus();
  });
  $("chat-settings").addEventListener("change", saveSettings);
  $("chat-model").addEventListener("change", () => refreshModels());
  await Promise.all([loadTools(saved), refreshModels()]);
}
