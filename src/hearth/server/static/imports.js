// Tools panel: Import. Each chosen file is sent on its own to /api/imports with streamed progress,
// and gets one row in the report: imported, updated, skipped as duplicate, or refused and why.
// Nothing from the files is shown; only names, counts and reasons.

import { $, apiJson, button, el, formatNumber, say } from "./api.js";

const csrfMeta = document.querySelector('meta[name="csrf-token"]');
const csrfToken = csrfMeta ? csrfMeta.content : "";

const ui = {
  form: $("import-form"),
  files: $("import-files"),
  persona: $("import-persona"),
  mine: $("import-mine"),
  run: $("import-run"),
  progress: $("import-progress"),
  report: $("import-report"),
  status: $("import-status"),
  exportPersona: $("export-persona"),
  exportCard: $("export-card"),
  exportBook: $("export-book"),
  exportLorebook: $("export-lorebook"),
};

let known = []; // the personas, to name the one a card matches

function updateCardLink() {
  const id = ui.exportPersona.value;
  if (id) ui.exportCard.href = `/api/exports/personas/${encodeURIComponent(id)}/card`;
  else ui.exportCard.removeAttribute("href");
}

// One book per download, as SillyTavern keeps them apart; "All books" merges every fragment.
function updateLorebookLink() {
  const book = ui.exportBook.value;
  ui.exportLorebook.href = book ? `/api/exports/lorebook?book=${encodeURIComponent(book)}` : "/api/exports/lorebook";
}

async function loadExportBooks() {
  const books = await apiJson("GET", "/api/fragments/books");
  const chosen = ui.exportBook.value;
  const names = books.filter((b) => b.fragments).map((b) => b.name);
  ui.exportBook.replaceChildren(new Option("All books", ""), ...names.map((n) => new Option(n, n)));
  ui.exportBook.value = names.includes(chosen) ? chosen : "";
  updateLorebookLink();
}

export async function showImports() {
  if (!ui.form) return;
  try {
    const personas = await apiJson("GET", "/api/personas");
    known = personas;
    const keep = ui.persona.value;
    ui.persona.replaceChildren(new Option("First persona", ""));
    for (const p of personas) ui.persona.append(new Option(p.display_name, String(p.id)));
    ui.persona.value = keep;
    const chosen = ui.exportPersona.value;
    ui.exportPersona.replaceChildren(...personas.map((p) => new Option(p.display_name, String(p.id))));
    if (chosen) ui.exportPersona.value = chosen;
    updateCardLink();
    await loadExportBooks();
  } catch (error) {
    say(ui.status, error.message, "error");
  }
}

// The report's counts in a person's words, singular or plural as the number asks ("1 persona").
const COUNT_WORDS = {
  personas: ["persona", "personas"], personas_updated: ["persona updated", "personas updated"],
  avatars_updated: ["picture updated", "pictures updated"],
  fragments: ["lore entry", "lore entries"], fragments_added: ["lore entry added", "lore entries added"],
  fragments_updated: ["lore entry updated", "lore entries updated"],
  fragments_removed: ["lore entry removed", "lore entries removed"],
  conversations: ["conversation", "conversations"], messages: ["message", "messages"],
  attachments: ["attachment", "attachments"], documents: ["document", "documents"],
  documents_updated: ["document updated", "documents updated"], duplicates: ["already here", "already here"],
  chunks: ["passage", "passages"], proposals: ["suggestion to review", "suggestions to review"],
  mining_failed: ["suggestion step failed", "suggestion steps failed"],
  system_skipped: ["system note skipped", "system notes skipped"], imported: ["imported", "imported"],
  updated: ["updated", "updated"], scope_personas_missing: ["persona not found", "personas not found"],
};

function countWords(key, value) {
  const [one, many] = COUNT_WORDS[key] || [key.replace(/_/g, " ").replace(/s\b/, ""), key.replace(/_/g, " ")];
  return `${formatNumber(value)} ${value === 1 ? one : many}`;
}

function describe(report) {
  if (report.status === "refused") return report.reason;
  const parts = Object.entries(report.counts || {}).map(([k, v]) => countWords(k, v));
  return parts.join(", ") || "nothing new";
}

// A changed card of one of the person's own personas (X3) waits for a choice: update or new.
const asks = (report) => report.status === "refused" && Boolean((report.ids || {}).existing);

function fillRow(row, file, report) {
  row.dataset.status = asks(report) ? "ask" : report.status;
  const label = asks(report) ? "already here" : report.status === "duplicate" ? "skipped (duplicate)" : report.status;
  row.replaceChildren(el("td", "", file.name), el("td", "", report.format || ""),
    el("td", `import-${asks(report) ? "ask" : report.status}`, label), asks(report) ? choice(row, file, report)
      : el("td", "", describe(report)));
}

function choice(row, file, report) {
  const cell = el("td", "import-choice");
  const id = report.ids.existing[0];
  const persona = known.find((p) => p.id === id);
  cell.append(el("span", "", `This character is already here${persona ? ` as ${persona.display_name}` : ""}`
    + " and the card has changed: "));
  const pick = (onMatch, text) => button(text, async () => {
    for (const node of cell.querySelectorAll("button")) node.disabled = true;
    say(ui.status, `Importing ${file.name}…`);
    const again = await upload(file, onMatch);
    fillRow(row, file, again);
    const status = row.children[2]; // the buttons are gone: the keyboard stays on this row
    status.tabIndex = -1;
    status.focus();
    say(ui.status, again.status === "refused" ? `${file.name} was refused.` : `${file.name}: ${again.status}.`,
      again.status === "refused" ? "error" : "info");
  }, "small", `${text}: ${file.name}`);
  cell.append(pick("update", "Update it"), " ", pick("new", "Import as new"));
  return cell;
}

function addRow(file, report) {
  const row = el("tr");
  fillRow(row, file, report);
  ui.report.querySelector("tbody").append(row);
}

async function upload(file, onMatch = "") {
  const params = new URLSearchParams({ name: file.name });
  if (onMatch) params.set("on_match", onMatch);
  if (ui.persona.value) params.set("persona_id", ui.persona.value);
  if (ui.mine.checked) params.set("mine", "true");
  const response = await fetch(`/api/imports?${params}`, {
    method: "POST", body: file, credentials: "same-origin",
    headers: { "X-CSRF-Token": csrfToken, Accept: "application/x-ndjson" },
  });
  if (!response.ok) {
    let detail = `Upload failed (${response.status})`;
    try { detail = (await response.json()).detail || detail; } catch (_) { /* keep the status line */ }
    return { status: "refused", reason: detail, format: "" };
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  let last = { status: "refused", reason: "The server closed the upload without a report.", format: "" };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffered.indexOf("\n")) >= 0) {
      const event = JSON.parse(buffered.slice(0, cut));
      buffered = buffered.slice(cut + 1);
      if (event.type === "progress") {
        ui.progress.max = Math.max(event.total, 1);
        ui.progress.value = event.done;
      } else if (event.type === "report") {
        last = event;
      } else if (event.type === "error") {
        last = { status: "refused", reason: event.detail, format: "" };
      }
    }
  }
  return last;
}

if (ui.form) {
  ui.exportPersona.addEventListener("change", updateCardLink);
  ui.exportBook.addEventListener("change", updateLorebookLink);
  ui.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const files = [...ui.files.files];
    if (!files.length) {
      say(ui.status, "Choose one or more files first.", "error");
      return;
    }
    ui.run.disabled = true;
    ui.report.hidden = false;
    ui.progress.hidden = false;
    let refused = 0;
    let asked = 0;
    for (const [i, file] of files.entries()) {
      say(ui.status, `Importing ${file.name} (${i + 1} of ${files.length})…`);
      ui.progress.removeAttribute("value");
      const report = await upload(file);
      if (asks(report)) asked += 1;
      else if (report.status === "refused") refused += 1;
      addRow(file, report);
    }
    ui.progress.hidden = true;
    ui.run.disabled = false;
    const question = asked ? ` ${asked} ${asked === 1 ? "character is" : "characters are"} already here: choose below.` : "";
    say(ui.status, (refused ? `Done; ${refused} ${refused === 1 ? "file" : "files"} refused.` : "Done.") + question,
      refused ? "error" : "info");
  });
}
