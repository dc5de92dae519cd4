// Suites: run one seed of a suite (a known one, or a pasted suite file) and watch each turn
// pass or fail as it finishes, with its checks and its transcript.

import { api, ndjson } from "./api.js";
import { $, h, pretty, status } from "./dom.js";

let running = false;

function turnView(spec, record) {
  const verdict = record ? (record.passed ? "passed" : "failed") : "pending";
  const li = h("li", { class: `turn ${verdict}`, "data-turn": spec.name },
    h("p", { class: "turn-head" }, h("span", { class: `badge ${verdict}` }, verdict), " ", h("strong", {}, spec.name),
      record ? h("span", { class: "muted" }, ` · ${record.latency_s.toFixed(1)} s · ${record.steps.length} step(s) · stop: ${record.stop}`) : null),
    h("p", { class: "user" }, spec.user));
  if (!record) return li;
  if (record.error) li.append(h("p", { class: "error-text" }, record.error));
  li.append(h("ul", { class: "checks", "aria-label": `Checks of ${spec.name}` },
    record.checks.map((c) => h("li", { class: c.ok ? "ok-text" : "error-text" }, `${c.ok ? "✓" : "✗"} ${c.check}`,
      c.detail ? h("span", { class: "muted" }, ` — ${c.detail}`) : null))));
  const transcript = h("details", { class: "transcript" }, h("summary", {}, "Transcript"));
  for (const step of record.steps) {
    transcript.append(h("p", { class: "step" }, h("strong", {}, `step ${step.number}`), ` ${step.kind}`,
      step.content ? h("span", {}, `: ${step.content}`) : null));
    for (const c of step.calls) {
      transcript.append(h("details", { class: `call ${c.result.ok ? "" : "failed"}` },
        h("summary", {}, h("span", { class: "tool-name" }, c.name), h("code", { class: "args" }, `(${JSON.stringify(c.arguments)})`),
          h("span", { class: `badge ${c.result.ok ? "ok" : "failed"}` }, c.result.ok ? "ok" : "failed")),
        h("pre", { class: "result" }, pretty(c.result))));
    }
    if (step.observation) transcript.append(h("p", { class: "note" }, step.observation));
  }
  transcript.append(h("p", { class: "answer" }, h("strong", {}, "Answer: "), record.answer ?? "(none)"));
  li.append(transcript);
  return li;
}

async function onRun(e) {
  e.preventDefault();
  if (running) return;
  const yaml = $("suite-yaml").value.trim();
  const body = { seed: Number($("suite-seed").value) || 0, ...(yaml ? { yaml } : { name: $("suite-name").value }) };
  const list = $("suite-turns"), out = $("suite-status");
  const specs = new Map();
  running = true;
  $("suite-run").disabled = true;
  list.replaceChildren();
  status(out, "starting…");
  try {
    for await (const line of ndjson("/api/suites/run", { method: "POST", json: body })) {
      if (line.type === "start") {
        line.turns.forEach((t) => { specs.set(t.name, t); list.append(turnView(t, null)); });
        status(out, `suite ${line.suite}, seed ${line.seed}: ${line.turns.length} turn(s)`);
      } else if (line.type === "model") {
        status(out, `${out.textContent} on ${line.model.id} (${line.model.backend ?? "?"})`);
      } else if (line.type === "turn") {
        const spec = specs.get(line.turn.name);
        list.querySelector(`[data-turn="${CSS.escape(line.turn.name)}"]`).replaceWith(turnView(spec, line.turn));
      } else if (line.type === "done") {
        const passed = [...list.querySelectorAll(".turn.passed")].length;
        status(out, `${line.passed ? "passed" : "failed"}: ${passed} of ${specs.size} turn(s) passed in ${line.latency_s.toFixed(1)} s`,
          line.passed ? "ok-text" : "error-text");
      } else if (line.type === "error") {
        status(out, `the run failed: ${line.message}`, "error-text");
      }
    }
  } catch (err) {
    status(out, `not run: ${err.message}`, "error-text");
  } finally {
    running = false;
    $("suite-run").disabled = false;
  }
}

export async function initSuites() {
  $("suite-form").addEventListener("submit", onRun);
}

export async function showSuites() {
  const select = $("suite-name");
  if (select.options.length) return;
  const data = await api("/api/suites");
  select.replaceChildren(...data.suites.map((s) => h("option", { value: s.file, title: s.description },
    `${s.name} (${s.turns.length} turn${s.turns.length === 1 ? "" : "s"})`)));
}
