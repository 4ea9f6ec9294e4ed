// Recall panel: the owner's search (shielded conversations only when asked, per search) and the
// search log with its counts, reliability and per-signal scores. Texts are plain words (their
// Markdown marks dropped); origins read as words (labels.js); scores, variants and filters show
// under "Show details".

import { $, apiJson, button, el, formatDate, say } from "./api.js";
import { RELIABILITY_LABELS, bindDetails, originLabel } from "./labels.js";
import { markdownText } from "./markdown.js";

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
  details: $("recall-details"),
};

// What is on screen, drawn again when "Show details" changes.
const shown = { results: null, entries: null, entry: null };
const plain = (text) => markdownText(text).replace(/\s+/g, " ").trim();

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
    // An archive passage opens its document as a read-only thread (archived.js).
    const link = el("a", "result-title", r.title || "Archive document");
    link.href = `#archived-${r.source_id}`;
    head.append(link);
  }
  if (r.date) head.append(el("span", "muted small", /^\d{4}-\d{2}-\d{2}$/.test(r.date) ? r.date : formatDate(r.date)));
  if (r.speaker) head.append(el("span", "chip quiet-chip", r.speaker));
  item.append(head);
  const text = markdownText(r.text ?? r.preview ?? "");
  item.append(el("p", "result-text", text.length > 600 ? `${text.slice(0, 600)}…` : text));
  if (ui.details.checked) item.append(scoreLine(r.scores || {}));
  return item;
}

ui.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const query = ui.query.value.trim();
  if (!query) return;
  say(ui.status, "Searching…");
  shown.results = null;
  ui.results.replaceChildren();
  try {
    const params = new URLSearchParams({
      q: query, include_shielded: String(ui.shielded.checked), archive: String(ui.archive.checked),
    });
    const outcome = await apiJson("GET", `${SEARCH}?${params}`);
    const results = outcome.results || [];
    shown.results = results;
    drawResults();
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
  shown.entries = entries;
  drawLog();
}

function drawResults() {
  ui.results.replaceChildren();
  if (!shown.results) return;
  if (!shown.results.length) ui.results.append(el("li", "muted empty", "Nothing found."));
  for (const r of shown.results) ui.results.append(resultItem(r));
}

function drawLog() {
  ui.logList.replaceChildren();
  if (!shown.entries.length) ui.logList.append(el("li", "muted empty", "No searches yet."));
  for (const entry of shown.entries) {
    const item = el("li", "log-entry");
    item.dataset.entryId = String(entry.id);
    const open = button("", () => showEntry(entry, open), "log-button");
    open.append(el("span", "log-query", plain(entry.query) || "(no words)"));
    const meta = el("span", "log-meta");
    meta.append(el("span", "chip quiet-chip", ui.details.checked ? entry.origin : originLabel(entry.origin)));
    meta.append(el("span", "", found(entry)));
    // With nothing found the judgement adds nothing in words; the details keep it ("none").
    if (entry.result_count || ui.details.checked) {
      meta.append(el("span", `reliability rel-${entry.reliability}`, reliabilityWords(entry.reliability)));
    }
    meta.append(el("span", "muted", formatDate(entry.created_at)));
    open.append(meta);
    open.setAttribute("aria-expanded", String(shown.entry !== null && shown.entry.id === entry.id));
    item.append(open);
    ui.logList.append(item);
  }
}

// "0 of 0" reads as nothing found; the candidate count is a detail.
function found(entry) {
  if (!entry.result_count) return ui.details.checked ? `nothing found (${entry.candidate_count} candidates)` : "nothing found";
  const results = `${entry.result_count} ${entry.result_count === 1 ? "result" : "results"}`;
  return ui.details.checked ? `${results} of ${entry.candidate_count} candidates` : results;
}

function reliabilityWords(value) {
  return ui.details.checked ? value : RELIABILITY_LABELS[value] || value;
}

function showEntry(entry, opener) {
  for (const node of ui.logList.querySelectorAll("[aria-expanded=true]")) node.setAttribute("aria-expanded", "false");
  opener.setAttribute("aria-expanded", "true");
  shown.entry = entry;
  drawEntry();
}

function drawEntry() {
  const entry = shown.entry;
  const d = ui.logDetail;
  d.hidden = false;
  d.replaceChildren();
  d.append(el("h3", "", plain(entry.query) || "(no words)"));
  const facts = el("dl", "numbers");
  const add = (label, value) => facts.append(el("dt", "", label), el("dd", "", String(value)));
  add("Origin", ui.details.checked ? entry.origin : originLabel(entry.origin));
  add("Results", entry.result_count);
  add("Candidates", entry.candidate_count);
  add("Reliability", reliabilityWords(entry.reliability));
  add("Took", `${entry.duration_ms} ms`);
  add("When", formatDate(entry.created_at));
  d.append(facts);
  if (ui.details.checked && entry.variants && entry.variants.length) {
    d.append(el("h4", "", "Variants"));
    const list = el("ul", "plain-list");
    for (const v of entry.variants) list.append(el("li", "", v));
    d.append(list);
  }
  const filters = Object.entries(entry.filters || {});
  if (ui.details.checked && filters.length) {
    d.append(el("h4", "", "Filters"));
    d.append(el("p", "small", filters.map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(", ") : v}`).join(" · ")));
  }
  d.append(el("h4", "", "Results and scores"));
  const results = el("ol", "result-list compact-results");
  if (!entry.results.length) results.append(el("li", "muted empty", "No results."));
  for (const r of entry.results) results.append(resultItem(r));
  d.append(results);
}

bindDetails(ui.details, () => {
  drawResults();
  if (shown.entries) drawLog();
  if (shown.entry) drawEntry();
});
ui.logRefresh.addEventListener("click", () => loadLog().catch((e) => say(ui.status, e.message, "error")));
