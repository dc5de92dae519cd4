// Metrics: the runtime's Prometheus text sampled every 2 s; counters become rates between
// samples (tokens/s, requests/s), gauges are plotted as they are (KV cache, queue).

import { send } from "./api.js";
import { $ } from "./dom.js";
import { linePlot } from "./plot.js";

const PERIOD_MS = 2000;
const KEEP = 150;                  // samples kept: five minutes
const samples = [];                // {t, values: Map(name -> summed value)}
let timer = null;
let visible = false;

// Requests that are the stack watching itself (the supervisor's health probes, this page's
// scrapes) are not traffic: they stay out of the request rate.
const WATCHING = /route="\/(health|metrics)"/;

// Prometheus text exposition -> Map(metric name -> sum over its label sets).
export function parseProm(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/);
    if (!m || (m[1] === "samevm_requests_total" && WATCHING.test(m[2] || ""))) continue;
    const v = Number(m[3]);
    if (Number.isFinite(v)) out.set(m[1], (out.get(m[1]) ?? 0) + v);
  }
  return out;
}

function rate(name) {
  const points = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i];
    const dv = (b.values.get(name) ?? 0) - (a.values.get(name) ?? 0);
    points.push([b.t, Math.max(0, dv) / ((b.t - a.t) || 1)]);     // a restart resets counters: no negative rate
  }
  return points;
}

const gauge = (fn) => samples.map((s) => [s.t, fn(s.values)]);
const last = (points) => (points.length ? points[points.length - 1][1] : 0);

function draw() {
  if (!visible) return;
  const tps = rate("samevm_generation_tokens_total");
  const rps = rate("samevm_requests_total");
  const kv = gauge((v) => { const total = v.get("samevm_kv_blocks_total") ?? 0; return total ? (100 * (v.get("samevm_kv_blocks_used") ?? 0)) / total : 0; });
  const running = gauge((v) => v.get("samevm_running_sequences") ?? 0);
  const waiting = gauge((v) => v.get("samevm_waiting_sequences") ?? 0);
  linePlot($("plot-tps"), [{ label: "tokens/s", points: tps }], { xLabel: "s" });
  linePlot($("plot-kv"), [{ label: "% used", points: kv }], { xLabel: "s", yMin: 0, yMax: 100 });
  linePlot($("plot-queue"), [{ label: "running", points: running }, { label: "waiting", points: waiting }], { xLabel: "s" });
  linePlot($("plot-rps"), [{ label: "requests/s", points: rps }], { xLabel: "s" });
  $("m-tps").textContent = `${last(tps).toFixed(1)} tokens/s`;
  $("m-kv").textContent = `${last(kv).toFixed(1)} %`;
  $("m-queue").textContent = `${last(running)} running, ${last(waiting)} waiting`;
  $("m-rps").textContent = `${last(rps).toFixed(2)} requests/s`;
}

async function sample() {
  const started = samples.length ? samples[0].t0 : performance.now();
  try {
    const r = await send("/runtime/metrics");
    samples.push({ t: (performance.now() - started) / 1000, t0: started, values: parseProm(await r.text()) });
    if (samples.length > KEEP) samples.shift();
  } catch {
    return;          // the runtime is restarting or reloading: the next sample tries again
  }
  draw();
}

export function initMetrics() {
  sample();
  timer = setInterval(sample, PERIOD_MS);
}

export function showMetrics(on) {
  visible = on;
  draw();
}

export function stopMetrics() { clearInterval(timer); }
