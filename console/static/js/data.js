// Data: the worker's databases and their tables, SQL read-only through /v1/sql/query unless
// "Allow writes" is on (then /v1/sql/exec), and the agent's memory notes (memory tools).

import { api } from "./api.js";
import { $, h, status, table, when } from "./dom.js";

const TABLES = "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name";
const quote = (name) => `"${name.replaceAll('"', '""')}"`;

async function refreshDatabases() {
  const data = await api("/worker/v1/sql/databases");
  const select = $("sql-db");
  const current = select.value;
  select.replaceChildren(...data.databases.map((d) => h("option", { value: d.name }, d.kind === "url" ? `${d.name} (${d.dialect})` : d.name)));
  if (data.databases.some((d) => d.name === current)) select.value = current;
  await refreshTables();
}

async function refreshTables() {
  const list = $("sql-tables");
  const db = $("sql-db").value;
  if (!db) { list.replaceChildren(h("li", { class: "muted" }, "no databases yet")); return; }
  try {
    const r = await api("/worker/v1/sql/query", { method: "POST", json: { db, sql: TABLES } });
    list.replaceChildren(...r.rows.map(([name, type]) => h("li", {},
      h("button", { type: "button", class: "link", onclick: () => browse(name) }, name), type === "view" ? " (view)" : "")));
    if (!r.rows.length) list.replaceChildren(h("li", { class: "muted" }, "no tables"));
  } catch (e) {
    list.replaceChildren(h("li", { class: "muted" }, `tables not listed: ${e.message}`));
  }
}

function browse(name) {
  $("sql-text").value = `SELECT * FROM ${quote(name)} LIMIT 100`;
  $("sql-write").checked = false;
  $("sql-form").requestSubmit();
}

async function onRun(e) {
  e.preventDefault();
  const write = $("sql-write").checked;
  const out = $("sql-status"), result = $("sql-result");
  status(out, "running…");
  try {
    const r = await api(`/worker/v1/sql/${write ? "exec" : "query"}`, { method: "POST",
      json: { db: $("sql-db").value, sql: $("sql-text").value } });
    const rows = `${r.rows.length} row(s)${r.truncated ? " (cut at the row limit)" : ""}`;
    status(out, write ? `${rows}; ${r.rowcount ?? 0} changed` : rows, "ok-text");
    result.replaceChildren(r.columns.length ? table(r.columns, r.rows) : "");
    if (write) await refreshDatabases();
  } catch (err) {
    status(out, err.message, "error-text");
    result.replaceChildren();
  }
}

async function refreshNotes() {
  const list = $("memory-notes");
  const r = await api("/api/tools/call", { method: "POST", json: { name: "memory_read", arguments: { limit: 50 } } });
  if (!r.ok) { list.replaceChildren(h("li", { class: "error-text" }, r.error)); return; }
  list.replaceChildren(...r.data.notes.map((n) => h("li", {}, h("span", { class: "muted" }, `#${n.id} · ${when(n.created_at + "Z")}`),
    " ", n.text, n.tags.length ? h("span", { class: "tags" }, ` [${n.tags.join(", ")}]`) : "")));
  if (!r.data.notes.length) list.replaceChildren(h("li", { class: "muted" }, "no notes saved"));
}

export async function initData() {
  $("sql-form").addEventListener("submit", onRun);
  $("sql-db").addEventListener("change", refreshTables);
  $("memory-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const tags = $("memory-tags").value.split(",").map((t) => t.trim()).filter(Boolean);
    const r = await api("/api/tools/call", { method: "POST", json: { name: "memory_add", arguments: { text: $("memory-text").value, tags } } });
    if (!r.ok) { alert(r.error); return; }
    $("memory-text").value = "";
    $("memory-tags").value = "";
    await refreshNotes();
  });
}

export async function showData() {
  await Promise.all([refreshDatabases(), refreshNotes()]);
}
