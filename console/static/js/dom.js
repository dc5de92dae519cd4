// A few DOM helpers: build elements without innerHTML (every text from the stack is data).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k in el && typeof v !== "string") el[k] = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

export const $ = (id) => document.getElementById(id);

export function status(el, text, kind = "") {
  el.textContent = text;
  el.className = kind;
}

export function pretty(value) {
  if (typeof value === "string") {
    try { return JSON.stringify(JSON.parse(value), null, 2); } catch { return value; }
  }
  return JSON.stringify(value, null, 2);
}

// A table of rows (arrays of cells) with column names, for query results.
export function table(columns, rows, caption) {
  const cell = (v) => (v === null ? h("td", { class: "null" }, "NULL") : h("td", {}, typeof v === "object" ? JSON.stringify(v) : String(v)));
  return h("table", {},
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map(cell)))));
}

export function when(seconds) {
  if (!seconds) return "";
  const d = typeof seconds === "number" ? new Date(seconds * 1000) : new Date(seconds);
  return isNaN(d) ? String(seconds) : d.toLocaleString();
}

// The uncertainty summary the runtime attaches to a generation (samevm.awareness), in words.
export function awarenessText(a) {
  if (!a || Object.keys(a).length === 0) return "";
  const parts = [];
  if (a.mean_logprob !== undefined) parts.push(`mean log-prob ${a.mean_logprob.toFixed(2)}`);
  if (a.perplexity !== undefined) parts.push(`perplexity ${a.perplexity.toFixed(2)}`);
  if (a.max_entropy !== undefined) parts.push(`max entropy ${a.max_entropy.toFixed(2)}`);
  if (a.low_confidence_tokens !== undefined) parts.push(`${a.low_confidence_tokens} low-confidence of ${a.tokens ?? "?"} tokens`);
  return parts.join(" · ");
}
