// Documents: upload PDFs and text into a collection (upload progress, then the worker's
// indexing), the collection's documents with delete, and search whose hits cite source,
// page and passage.

import { ApiError, api, upload } from "./api.js";
import { $, h, status, when } from "./dom.js";

const collection = () => $("doc-collection").value.trim() || "default";

async function refreshCollections() {
  const data = await api("/worker/v1/rag/collections");
  $("doc-collections").replaceChildren(...data.collections.map((c) => h("option", { value: c })));
}

async function refreshDocuments() {
  const name = collection();
  $("doc-current").textContent = name;
  const body = $("doc-table").tBodies[0];
  let docs = [];
  try {
    docs = (await api(`/worker/v1/rag/documents?collection=${encodeURIComponent(name)}`)).documents;
  } catch (e) {
    if (!(e instanceof ApiError && (e.status === 404 || e.status === 400))) throw e;   // no such collection yet
  }
  body.replaceChildren(...docs.map((d) => h("tr", {},
    h("td", {}, d.source), h("td", {}, d.kind), h("td", {}, String(d.pages)), h("td", {}, String(d.chunks)),
    h("td", {}, when(d.ingested_at)),
    h("td", {}, h("button", { type: "button", class: "danger", "aria-label": `Delete ${d.source}`,
      onclick: () => removeDocument(name, d) }, "Delete")))));
  if (!docs.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "no documents")));
}

async function removeDocument(name, doc) {
  const r = await api(`/worker/v1/rag/documents?collection=${encodeURIComponent(name)}&doc_id=${encodeURIComponent(doc.doc_id)}`,
    { method: "DELETE" });
  status($("doc-status"), `deleted ${doc.source} (${r.deleted_chunks} chunks)`);
  await refreshDocuments();
}

async function onUpload(e) {
  e.preventDefault();
  const files = $("doc-files").files;
  const out = $("doc-status"), bar = $("doc-progress");
  if (!files.length) { status(out, "choose one or more files first", "error-text"); return; }
  const form = new FormData();
  form.append("collection", collection());
  for (const f of files) form.append("files", f, f.name);
  bar.hidden = false;
  bar.value = 0;
  status(out, `uploading ${files.length} file(s)…`);
  try {
    const result = await upload("/worker/v1/rag/ingest", form, (fraction) => {
      bar.value = Math.round(fraction * 100);
      if (fraction >= 1) status(out, "uploaded; extracting, chunking and embedding…");
    });
    const lines = result.documents.map((d) => `${d.source}: ${d.status}, ${d.pages} page(s), ${d.chunks} chunk(s)`);
    status(out, `indexed into ${result.collection}: ${lines.join("; ")}`, "ok-text");
    $("doc-files").value = "";
  } catch (err) {
    status(out, `upload failed: ${err.message}`, "error-text");
  } finally {
    bar.hidden = true;
  }
  await Promise.all([refreshCollections(), refreshDocuments()]);
}

async function onSearch(e) {
  e.preventDefault();
  const list = $("doc-hits");
  list.replaceChildren(h("li", { class: "muted" }, "searching…"));
  try {
    const r = await api("/worker/v1/rag/search", { method: "POST", json: {
      query: $("doc-query").value, collection: collection(), k: Number($("doc-k").value) || 5, mode: $("doc-mode").value } });
    list.replaceChildren(...r.results.map((hit, i) => h("li", { class: "hit" },
      h("p", { class: "cite" }, h("strong", {}, `[${i + 1}] ${hit.source}`), hit.page ? `, page ${hit.page}` : "",
        h("span", { class: "muted" }, ` · score ${hit.score.toFixed(3)}`)),
      h("blockquote", {}, hit.text))));
    if (!r.results.length) list.replaceChildren(h("li", { class: "muted" }, "no hits"));
  } catch (err) {
    list.replaceChildren(h("li", { class: "error-text", role: "alert" }, err.message));
  }
}

export async function initDocuments() {
  $("doc-upload").addEventListener("submit", onUpload);
  $("doc-search").addEventListener("submit", onSearch);
  $("doc-collection").addEventListener("change", refreshDocuments);
  $("doc-drop").addEventListener("click", async () => {
    const name = collection();
    if (!confirm(`Delete the collection ${name} and every document in it?`)) return;
    const r = await api(`/worker/v1/rag/collections/${encodeURIComponent(name)}`, { method: "DELETE" });
    status($("doc-status"), `deleted collection ${name} (${r.deleted_chunks} chunks)`);
    await Promise.all([refreshCollections(), refreshDocuments()]);
  });
}

export async function showDocuments() {
  await Promise.all([refreshCollections(), refreshDocuments()]);
}
