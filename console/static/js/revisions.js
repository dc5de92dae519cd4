// The runtime's revisions (GET /admin/revisions) and switching what serves (POST /admin/reload
// with a revision's path, or /admin/rollback), shared by the chat's picker and the jobs page.

import { api } from "./api.js";

export const listRevisions = () => api("/runtime/admin/revisions");

// What serves changed: the header and the chat's pickers listen for this.
const changed = (result) => {
  document.dispatchEvent(new CustomEvent("samevm:served"));
  return result;
};

// Serve a revision the runtime has served before (its GGUF and LoRA adapter, if it had one);
// the runtime checks it before the swap.
export const serveRevision = (rev) =>
  api("/runtime/admin/reload", {
    method: "POST", json: { path: rev.path, revision: rev.revision, adapter: rev.adapter ?? null },
  }).then(changed);

export const rollback = () => api("/runtime/admin/rollback", { method: "POST" }).then(changed);

export const announce = changed;

// Revisions that can serve: everything the registry knows but those it refused.
export const servable = (described) => described.revisions.filter((r) => r.status !== "refused");
