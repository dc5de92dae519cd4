// The console's entry point: the tabs, each section's setup, and the header line saying
// what serves (model, revision, backend), refreshed every 10 s.

import { api } from "./api.js";
import { $ } from "./dom.js";
import { initChat, refreshModels } from "./chat.js";
import { initData, showData } from "./data.js";
import { initDocuments, showDocuments } from "./documents.js";
import { initJobs, showJobs } from "./jobs.js";
import { initMetrics, showMetrics } from "./metrics.js";
import { initSuites, showSuites } from "./suites.js";
import { initTabs } from "./tabs.js";

let served = null;

async function header() {
  try {
    const models = await api("/runtime/v1/models");
    served = models.data[0];
    $("served").textContent = `${served.id} · revision ${served.revision} · ${served.backend} · context ${served.context_length}`;
    $("served").className = "";
  } catch (e) {
    $("served").textContent = `runtime: ${e.message}`;
    $("served").className = "error-text";
  }
}

function report(where) {
  return (e) => {
    console.error(where, e);
    $("served").textContent = `${where}: ${e.message}`;
    $("served").className = "error-text";
  };
}

const SHOW = {
  chat: () => refreshModels(),
  documents: showDocuments,
  data: showData,
  jobs: () => showJobs(served?.id),
  suites: showSuites,
  metrics: async () => {},
};

async function main() {
  await header();
  await Promise.all([initChat().catch(report("chat")), initDocuments(), initData(), initJobs(), initSuites()]);
  initMetrics();
  initTabs((name) => {
    showMetrics(name === "metrics");
    SHOW[name]().catch(report(name));
  });
  document.body.dataset.ready = "1";        // the page is wired (tests wait for this)
  setInterval(header, 10000);
  document.addEventListener("samevm:served", () => {
    header();
    refreshModels().catch(report("chat"));
  });
}

main();
