// Jobs: an ORPO fine-tune from the pairs chosen in the table, the jobs with their state,
// one job followed live (its event stream: stage, step, loss plotted), the runtime's
// revisions with the one that serves now, promote, serve an earlier one, and rollback.

import { ApiError, api, events } from "./api.js";
import { $, h, status, when } from "./dom.js";
import { linePlot } from "./plot.js";
import { announce, listRevisions, rollback, servable, serveRevision } from "./revisions.js";

const EXAMPLE = [
  { prompt: "Who are you?", chosen: " I am the samevm assistant.", rejected: " I am a search engine." },
  { prompt: "Where do you run?", chosen: " On this machine, with my tools.", rejected: " In a data centre far away." },
];
let pairs = [];
let watching = null;                // {id, controller}

function loadPairs() {
  const out = $("job-status");
  const text = $("job-pairs").value.trim();
  pairs = [];
  const problems = [];
  text.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    try {
      const p = JSON.parse(line);
      if (["prompt", "chosen", "rejected"].every((k) => typeof p[k] === "string")) pairs.push(p);
      else problems.push(`line ${i + 1}: needs prompt, chosen and rejected strings`);
    } catch { problems.push(`line ${i + 1}: not JSON`); }
  });
  $("job-pair-table").tBodies[0].replaceChildren(...pairs.map((p, i) => h("tr", {},
    h("td", {}, h("input", { type: "checkbox", checked: true, "data-pair": String(i), "aria-label": `Use pair ${i + 1}` })),
    h("td", {}, p.prompt), h("td", {}, p.chosen), h("td", {}, p.rejected))));
  $("job-pair-count").textContent = `${pairs.length} pair(s) loaded`;
  status(out, problems.join("; "), problems.length ? "error-text" : "");
}

function chosenPairs() {
  return [...$("job-pair-table").querySelectorAll("input[data-pair]:checked")].map((c) => pairs[Number(c.dataset.pair)]);
}

async function onStart(e) {
  e.preventDefault();
  const out = $("job-status");
  const dataset = chosenPairs();
  if (!dataset.length) { status(out, "load pairs and choose at least one", "error-text"); return; }
  const steps = Number($("job-steps").value);
  try {
    const job = await api("/worker/v1/jobs/orpo", { method: "POST", json: {
      dataset, base_model: $("job-base").value.trim(), promote: $("job-promote").checked,
      hyperparameters: { max_steps: steps, warmup_steps: Math.min(3, steps - 1), learning_rate: Number($("job-lr").value) } } });
    status(out, `${job.id}: ${job.message}`, "ok-text");
    await refreshJobs();
    watch(job.id);
  } catch (err) {
    status(out, `not started: ${err.message}`, "error-text");
  }
}

function progressText(p) {
  if (!p) return "";
  const loss = p.loss !== undefined ? `, loss ${p.loss.toFixed(4)}` : "";
  const margin = p.reward_margin !== undefined ? `, reward margin ${p.reward_margin.toFixed(3)}` : "";
  return `step ${p.step}/${p.max_steps}${loss}${margin}`;
}

async function refreshJobs() {
  const jobs = (await api("/worker/v1/jobs")).data;
  $("job-table").tBodies[0].replaceChildren(...jobs.slice().reverse().map((j) => h("tr", { "data-job": j.id },
    h("td", {}, j.id), h("td", {}, h("span", { class: `badge ${j.state}` }, j.state)), h("td", {}, j.stage || ""),
    h("td", {}, progressText(j.progress)), h("td", {}, j.request?.base_model || ""),
    h("td", {}, h("div", { class: "row-actions" },
      h("button", { type: "button", onclick: () => watch(j.id), "aria-label": `Watch ${j.id}` }, "Watch"),
      j.state === "succeeded" ? h("button", { type: "button", onclick: () => promote(j.id), "aria-label": `Promote ${j.id}` }, "Promote") : null,
      ["queued", "running"].includes(j.state) ? h("button", { type: "button", class: "danger", onclick: () => cancel(j.id), "aria-label": `Cancel ${j.id}` }, "Cancel") : null)))));
  if (!jobs.length) $("job-table").tBodies[0].append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "no jobs yet")));
  const bases = new Set(jobs.filter((j) => j.result?.revision).map((j) => j.result.revision));
  return bases;
}

async function watch(id) {
  watching?.controller.abort();
  const controller = new AbortController();
  watching = { id, controller };
  $("job-watch").hidden = false;
  $("job-watch-title").textContent = `Job ${id}`;
  const losses = [];
  const bar = $("job-progress"), text = $("job-progress-text");
  bar.value = 0;
  text.textContent = "waiting for events…";
  linePlot($("job-loss"), [{ label: "loss", points: losses }], { xLabel: "step" });
  let stage = "", state = "";
  try {
    for await (const ev of events(`/worker/v1/jobs/${id}/events`, { signal: controller.signal })) {
      const data = JSON.parse(ev.data);
      if (data.type === "state") state = data.state;
      if (data.type === "stage") stage = data.stage;
      if (data.type === "progress") {
        bar.max = data.max_steps;
        bar.value = data.step;
        if (data.loss !== undefined) losses.push([data.step, data.loss]);
        linePlot($("job-loss"), [{ label: "loss", points: losses }], { xLabel: "step" });
      }
      const last = data.type === "progress" ? progressText(data) : text.dataset.progress || "";
      text.dataset.progress = last;
      text.textContent = [state, stage, last].filter(Boolean).join(" · ") + (data.error ? ` · ${data.error}` : "");
      if (data.type === "state") await refreshJobs();
    }
  } catch (err) {
    if (err.name !== "AbortError") text.textContent = `lost the event stream: ${err.message}`;
  }
  if (state === "succeeded") await refreshRevisions();
}

async function promote(id) {
  const out = $("job-status");
  try {
    const r = announce(await api(`/worker/v1/jobs/${id}/promote`, { method: "POST" }));
    status(out, `${id} serves now: revision ${r.promotion.served_revision} (was ${r.promotion.previous_revision ?? "none"})`, "ok-text");
  } catch (err) {
    status(out, `promotion refused: ${err.message}`, "error-text");
  }
  await Promise.all([refreshJobs(), refreshRevisions()]);
}

async function cancel(id) {
  await api(`/worker/v1/jobs/${id}`, { method: "DELETE" });
  await refreshJobs();
}

async function refreshRevisions() {
  const body = $("rev-table").tBodies[0];
  let r;
  try {
    r = await listRevisions();
  } catch (err) {
    $("rev-serving").textContent = `revisions not available: ${err.message}`;
    return;
  }
  $("rev-serving").textContent = `${r.model}: revision ${r.active} serves now` +
    (r.last_known_good ? `; rollback goes to ${r.last_known_good}` : "; nothing to roll back to");
  $("rev-rollback").disabled = !r.last_known_good;
  body.replaceChildren(...r.revisions.slice().reverse().map((rev) => h("tr", { class: rev.revision === r.active ? "active" : "" },
    h("td", {}, h("code", {}, rev.revision)),
    h("td", {}, rev.revision === r.active ? h("strong", {}, "serving") : rev.status || ""),
    h("td", {}, (rev.path || "").split("/").slice(-2).join("/")),
    h("td", {}, when(rev.activated_at)),
    h("td", {}, rev.revision !== r.active && servable(r).includes(rev)
      ? h("button", { type: "button", onclick: () => serve(rev), "aria-label": `Serve revision ${rev.revision}` }, "Serve this") : null))));
  const bases = $("job-bases");
  bases.replaceChildren(...r.revisions.map((rev) => h("option", { value: rev.revision })));
}

async function serve(rev) {
  try {
    await serveRevision(rev);
  } catch (err) {
    $("rev-serving").textContent = `reload refused: ${err.message}`;
    return;
  }
  await refreshRevisions();
}

export async function initJobs() {
  $("job-pairs").value = EXAMPLE.map((p) => JSON.stringify(p)).join("\n");
  loadPairs();
  $("job-load").addEventListener("click", loadPairs);
  $("job-form").addEventListener("submit", onStart);
  $("rev-rollback").addEventListener("click", async () => {
    try {
      await rollback();
    } catch (err) {
      $("rev-serving").textContent = `rollback refused: ${err.message}`;
      return;
    }
    await refreshRevisions();
  });
}

export async function showJobs(servedModel) {
  if (!$("job-base").value && servedModel) $("job-base").value = servedModel;
  await Promise.all([refreshJobs(), refreshRevisions().catch((e) => {
    if (!(e instanceof ApiError)) throw e;
  })]);
}
