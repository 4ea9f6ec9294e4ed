// Recall panel: the owner's search (shielded conversations only when asked, per search) and the
// search log with its counts, reliability and per-signal scores.

import { $, apiJson, button, el, formatDate, say } from "./api.js";

// The recall routes (see the HTTP API page).
const SEARCH = "/api/search";
const LOG = "/api/search-log";

const ui = {
  unavailable: $("recall-unavailable"),
  form: $("search-form"),
  query: $("search-query"),
  shielded: $("search-shielded"),
  archive: $("search-archive"),
  status: $("search-status"),
  results: $("search-results"),
  logList: $("searchlog-list"),
  logDetail: $("searchlog-detail"),
  logRefresh: $("searchlog-refresh"),
};

const SCORE_KEYS = [["fused", "fused"], ["keyword", "keyword"], ["keyword_rank", "keyword rank"],
  ["vector", "vector"], ["vector_rank", "vector rank"], ["rrf", "rrf"], ["boost", "boost"], ["score", "score"]];

function missing(error) {
  return error.status === 404 && /no such route/.test(error.message);
}

function markUnavailable() {
  ui.unavailable.hidden = false;
  ui.unavailable.textContent = "Search is not available on this server yet.";
}

export async function showRecall() {
  await loadLog();
}

function scoreLine(scores) {
  const line = el("p", "scores");
  for (const [key, label] of SCORE_KEYS) {
    if (typeof scores[key] !== "number") continue;
    const part = el("span", "score");
    part.dataset.signal = key;
    part.append(el("span", "score-name", label), el("span", "score-value", String(scores[key])));
    line.append(part);
  }
  if (Array.isArray(scores.signals) && scores.signals.length) line.append(el("span", "chip", scores.signals.join(" + ")));
  return line;
}

function resultItem(r) {
  const item = el("li", "result");
  const head = el("div", "result-head");
  if (r.kind === "message") {
    const link = el("a", "result-title", r.title || "Untitled conversation");
    link.href = `#conversation-${r.source_id}`;
    head.append(link);
  } else {
    head.append(el("span", "result-title", r.title || "Archive document"));
  }
  if (r.date) head.append(el("span", "muted small", /^\d{4}-\d{2}-\d{2}$/.test(r.date) ? r.date : formatDate(r.date)));
  if (r.speaker) head.append(el("span", "chip quiet-chip", r.speaker));
  item.append(head);
  const text = r.text ?? r.preview ?? "";
  item.append(el("p", "result-text", text.length > 600 ? `${text.slice(0, 600)}…` : text));
  item.append(scoreLine(r.scores || {}));
  return item;
}

ui.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const query = ui.query.value.trim();
  if (!query) return;
  say(ui.status, "Searching…");
  ui.results.replaceChildren();
  try {
    const params = new URLSearchParams({
      q: query, include_shielded: String(ui.shielded.checked), archive: String(ui.archive.checked),
    });
    const outcome = await apiJson("GET", `${SEARCH}?${params}`);
    const results = outcome.results || [];
    if (!results.length) ui.results.append(el("li", "muted empty", "Nothing found."));
    for (const r of results) ui.results.append(resultItem(r));
    await loadLog();
    const shielded = ui.shielded.checked ? " Shielded conversations were included." : "";
    say(ui.status, `${results.length} ${results.length === 1 ? "result" : "results"} of ${outcome.candidates ?? results.length}`
      + ` candidates · reliability ${outcome.reliability}.${shielded}`, "success");
  } catch (error) {
    if (missing(error)) markUnavailable();
    say(ui.status, error.message, "error");
  }
});

async function loadLog() {
  let entries;
  try {
    entries = await apiJson("GET", `${LOG}?limit=50`);
  } catch (error) {
    if (missing(error)) {
      markUnavailable();
      ui.logList.replaceChildren(el("li", "muted empty", "The search log is not available yet."));
      return;
    }
    throw error;
  }
  ui.logList.replaceChildren();
  if (!entries.length) ui.logList.append(el("li", "muted empty", "No searches yet."));
  for (const entry of entries) {
    const item = el("li", "log-entry");
    item.dataset.entryId = String(entry.id);
    const open = button("", () => showEntry(entry, open), "log-button");
    open.append(el("span", "log-query", entry.query));
    const meta = el("span", "log-meta");
    meta.append(el("span", "chip quiet-chip", entry.origin));
    meta.append(el("span", "", `${entry.result_count} of ${entry.candidate_count}`));
    meta.append(el("span", `reliability rel-${entry.reliability}`, entry.reliability));
    meta.append(el("span", "muted", formatDate(entry.created_at)));
    open.append(meta);
    open.setAttribute("aria-expanded", "false");
    item.append(open);
    ui.logList.append(item);
  }
}

function showEntry(entry, opener) {
  for (const node of ui.logList.querySelectorAll("[aria-expanded=true]")) node.setAttribute("aria-expanded", "false");
  opener.setAttribute("aria-expanded", "true");
  const d = ui.logDetail;
  d.hidden = false;
  d.replaceChildren();
  d.append(el("h3", "", entry.query));
  const facts = el("dl", "numbers");
  const add = (label, value) => facts.append(el("dt", "", label), el("dd", "", String(value)));
  add("Origin", entry.origin);
  add("Results", entry.result_count);
  add("Candidates", entry.candidate_count);
  add("Reliability", entry.reliability);
  add("Took", `${entry.duration_ms} ms`);
  add("When", formatDate(entry.created_at));
  d.append(facts);
  if (entry.variants && entry.variants.length) {
    d.append(el("h4", "", "Variants"));
    const list = el("ul", "plain-list");
    for (const v of entry.variants) list.append(el("li", "", v));
    d.append(list);
  }
  const filters = Object.entries(entry.filters || {});
  if (filters.length) {
    d.append(el("h4", "", "Filters"));
    d.append(el("p", "small", filters.map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(", ") : v}`).join(" · ")));
  }
  d.append(el("h4", "", "Results and scores"));
  const results = el("ol", "result-list compact-results");
  if (!entry.results.length) results.append(el("li", "muted empty", "No results."));
  for (const r of entry.results) results.append(resultItem(r));
  d.append(results);
}

ui.logRefresh.addEventListener("click", () => loadLog().catch((e) => say(ui.status, e.message, "error")));
