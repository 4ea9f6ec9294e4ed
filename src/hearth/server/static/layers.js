// Layers panel: household status (toggles and values), pending changes, the live context of the open
// conversation, the fragment editor and the review queue. Suggestions change nothing until approved.

import { $, apiJson, button, confirmButton, el, field, formatDate, say, splitList } from "./api.js";
import { conflictView } from "./conflict.js";
import { shared } from "./shared.js";

const ui = {
  status: $("layers-status"),
  fields: $("status-fields"),
  addField: $("status-add"),
  fieldName: $("status-name"),
  fieldOptions: $("status-options"),
  fieldValue: $("status-value"),
  pending: $("pending-list"),
  live: $("live-context"),
  fragmentBox: $("fragment-add-box"),
  fragmentForm: $("fragment-add"),
  fragmentFilter: $("fragment-filter"),
  fragments: $("fragment-list"),
  books: $("fragment-books"),
  reviewFilter: $("review-filter"),
  reviewRun: $("review-run"),
  review: $("review-list"),
  pendingCount: $("pending-count"),
};

let fields = [];
let fragments = [];
let editingFragment = null;

const KIND_NAMES = {
  status_change: "Status change", fragment_add: "New lore entry", fragment_update: "Lore update",
  memory_add: "New memory",
};

function report(text, kind = "success") {
  say(ui.status, text, kind);
}

export async function showLayers() {
  ui.reviewRun.disabled = !shared.current;
  await loadFields(); // pending changes offer the field's options, so fields come first
  await Promise.all([loadPending(), loadFragments(), loadReview(), loadLive()]);
}

export async function refreshPendingCount() {
  const pending = await apiJson("GET", "/api/review?status=pending");
  ui.pendingCount.textContent = pending.length ? String(pending.length) : "";
  ui.pendingCount.hidden = !pending.length;
  ui.pendingCount.setAttribute("aria-label", `${pending.length} waiting for review`);
}

// -- household status ------------------------------------------------------------------------------
async function loadFields() {
  fields = await apiJson("GET", "/api/status");
  ui.fields.replaceChildren();
  if (!fields.length) ui.fields.append(el("p", "muted empty", "No status fields yet."));
  for (const f of fields) ui.fields.append(statusRow(f));
}

function statusRow(f) {
  const row = el("div", "status-field");
  row.dataset.fieldId = String(f.id);
  const head = el("div", "status-head");
  head.append(el("span", "status-name", f.name));
  head.append(el("span", "status-value", f.value ?? "not set"));
  if (f.valid_from) head.append(el("span", "muted small", `since ${formatDate(f.valid_from)}`));
  row.append(head);

  const controls = el("div", "status-controls");
  if (f.options.length) {
    const group = el("div", "toggle-group");
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", f.name);
    for (const option of f.options) {
      const toggle = button(option, () => setValue(f, option), "toggle");
      toggle.setAttribute("aria-pressed", String(f.value === option));
      group.append(toggle);
    }
    controls.append(group);
  } else {
    const value = field(`${f.name} value`, "text", { value: f.value ?? "", maxLength: 200, className: "grow" });
    value.wrap.querySelector("label").classList.add("visually-hidden");
    const form = el("form", "inline-row");
    const set = el("button", "", "Set");
    set.type = "submit";
    form.append(value.wrap, set);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      setValue(f, value.input.value.trim() || null);
    });
    controls.append(form);
  }
  if (f.value !== null) controls.append(button("Clear", () => setValue(f, null), "quiet small", `Clear ${f.name}`));
  controls.append(confirmButton("Remove", "Confirm remove", async () => {
    try {
      await apiJson("DELETE", `/api/status/${f.id}`);
      await loadFields();
      report(`Removed the field “${f.name}”. Its history is kept.`);
    } catch (error) {
      report(error.message, "error");
    }
  }, `Remove field ${f.name}`));
  row.append(controls);
  return row;
}

async function setValue(f, value) {
  try {
    await apiJson("PUT", `/api/status/${f.id}/value`, { value });
    await loadFields();
    report(value === null ? `${f.name} cleared.` : `${f.name}: ${value}.`);
    ui.fields.querySelector(`[data-field-id="${f.id}"] [aria-pressed="true"]`)?.focus();
  } catch (error) {
    report(error.message, "error");
  }
}

ui.addField.addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = { name: ui.fieldName.value.trim(), options: splitList(ui.fieldOptions.value) };
  if (ui.fieldValue.value.trim()) body.value = ui.fieldValue.value.trim();
  try {
    await apiJson("POST", "/api/status", body);
    ui.addField.reset();
    await loadFields();
    report(`Added the field “${body.name}”.`);
  } catch (error) {
    report(error.message, "error");
  }
});

// -- proposals (pending changes and the review queue) ---------------------------------------------
function editorsFor(p) {
  // Returns [nodes, () => edits]: only changed values become edits.
  const payload = p.payload;
  if (p.kind === "status_change") {
    const known = fields.find((f) => f.id === payload.field_id);
    let to;
    if (known && known.options.length) {
      to = field("Change to", "select", { choices: known.options.map((o) => [o, o]), value: payload.to });
    } else {
      to = field("Change to", "text", { value: payload.to, maxLength: 200 });
    }
    return [[to.wrap], () => (to.input.value !== payload.to ? { to: to.input.value } : {})];
  }
  if (p.kind === "fragment_add" || p.kind === "fragment_update") {
    const triggers = field("Triggers (comma-separated)", "text", { value: (payload.triggers || []).join(", ") });
    const category = field("Category", "text", { value: payload.category || "", maxLength: 60 });
    const definition = field("Definition", "textarea", { value: payload.definition || "", maxLength: 4000, rows: 2 });
    return [[triggers.wrap, category.wrap, definition.wrap], () => {
      const edits = {};
      const list = splitList(triggers.input.value);
      if (list.join("\n") !== (payload.triggers || []).join("\n")) edits.triggers = list;
      if (category.input.value !== (payload.category || "")) edits.category = category.input.value;
      if (definition.input.value !== payload.definition) edits.definition = definition.input.value;
      return edits;
    }];
  }
  const text = field("Memory", "textarea", { value: payload.text || "", maxLength: 10000, rows: 2 });
  const category = field("Category", "text", { value: payload.category || "", maxLength: 100 });
  return [[text.wrap, category.wrap], () => {
    const edits = {};
    if (text.input.value !== payload.text) edits.text = text.input.value;
    if (category.input.value !== (payload.category || "")) edits.category = category.input.value;
    return edits;
  }];
}

function proposalCard(p) {
  const item = el("li", "proposal");
  item.dataset.proposalId = String(p.id);
  const head = el("div", "proposal-head");
  head.append(el("span", "chip", KIND_NAMES[p.kind] || p.kind));
  if (p.source === "offline") head.append(el("span", "chip quiet-chip", "offline suggestion"));
  head.append(el("span", "muted small", formatDate(p.created_at)));
  if (p.conversation_id) {
    const link = el("a", "small", "conversation");
    link.href = `#conversation-${p.conversation_id}`;
    head.append(link);
  }
  item.append(head);
  // The chip above already says "offline suggestion"; the label need not repeat it.
  item.append(el("p", "proposal-label", p.label.replace(/^\(offline suggestion\) /, "")));
  if (p.reason) item.append(el("p", "proposal-reason", `Why: ${p.reason}`));
  if (p.evidence) item.append(el("blockquote", "evidence", p.evidence));
  if (p.status !== "pending") {
    item.append(el("p", "muted small", `${p.status === "approved" ? "Approved" : "Dismissed"} by ${p.decided_by || "owner"}`
      + ` · ${formatDate(p.decided_at)}`));
    return item;
  }
  const form = el("form", "proposal-edit");
  const [editors, edits] = editorsFor(p);
  form.append(...editors);
  const actions = el("div", "inline-row");
  const approve = el("button", "primary", "Approve");
  approve.type = "submit";
  approve.setAttribute("aria-label", `Approve: ${p.label}`);
  actions.append(approve, button("Dismiss", () => decide(p, "dismiss"), "quiet", `Dismiss: ${p.label}`));
  form.append(actions);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    decide(p, "approve", edits());
  });
  if (p.kind === "memory_add" && p.payload.conflict) {
    approve.hidden = true; // settled by merge / supersede / keep both instead (B3)
    form.prepend(conflictView(p, (resolution) => decide(p, "approve", { ...edits(), resolution })));
  }
  item.append(form);
  return item;
}

async function decide(p, action, edits) {
  try {
    const body = action === "approve" ? { edits: edits || {} } : undefined;
    await apiJson("POST", `/api/review/${p.id}/${action}`, body);
    await loadFields();
    await Promise.all([loadPending(), loadReview(), loadFragments()]);
    const edited = edits && Object.keys(edits).length ? " with your edits" : "";
    report(action === "approve" ? `Approved${edited}.` : "Dismissed. It will not be suggested again unchanged.");
  } catch (error) {
    report(error.message, "error");
  }
}

async function loadPending() {
  const pending = await apiJson("GET", "/api/status/pending");
  ui.pending.replaceChildren();
  if (!pending.length) ui.pending.append(el("li", "muted empty", "Nothing waiting."));
  for (const p of pending) ui.pending.append(proposalCard(p));
}

async function loadReview() {
  const status = ui.reviewFilter.value;
  let proposals = await apiJson("GET", `/api/review?status=${encodeURIComponent(status)}`);
  ui.review.replaceChildren();
  if (status === "pending") {
    // Waiting status changes already have their own place under Pending changes.
    const changes = proposals.filter((p) => p.kind === "status_change").length;
    proposals = proposals.filter((p) => p.kind !== "status_change");
    if (changes) ui.review.append(el("li", "muted small", `${changes} status ${changes === 1 ? "change waits" : "changes wait"} under Pending changes.`));
  }
  if (!proposals.length) {
    ui.review.append(el("li", "muted empty", status === "pending" ? "Nothing else waiting for review." : "None yet."));
  }
  for (const p of proposals) ui.review.append(proposalCard(p));
  await refreshPendingCount();
}

ui.reviewFilter.addEventListener("change", () => loadReview().catch((e) => report(e.message, "error")));

ui.reviewRun.addEventListener("click", async () => {
  if (!shared.current) return;
  try {
    const queued = await apiJson("POST", "/api/review/run", { conversation_id: shared.current.id });
    report(`Review queued (job ${queued.job_id}). Suggestions appear here once the worker has run it.`);
  } catch (error) {
    report(error.message, "error");
  }
});

// -- live context -----------------------------------------------------------------------------------
const LIVE_FIELDS = [["mood", "Mood", 120], ["events", "Events", 400], ["needs", "Needs", 300], ["summary", "Summary", 160]];

async function loadLive() {
  ui.live.replaceChildren();
  const c = shared.current;
  if (!c) {
    ui.live.append(el("p", "muted empty", "Open a conversation in Chat to see and edit what it is about."));
    return;
  }
  const view = await apiJson("GET", `/api/conversations/${c.id}/live-context`);
  const state = view.live_context;
  ui.live.append(el("p", "muted small", `For “${c.title || "Untitled conversation"}”`));
  if (state && state.display_summary) ui.live.append(el("p", "live-summary", state.display_summary));
  const form = el("form", "live-form");
  const inputs = {};
  for (const [key, label, max] of LIVE_FIELDS) {
    const f = field(label, key === "events" || key === "needs" ? "textarea" : "text",
      { value: state ? state[key] : "", maxLength: max, rows: 2 });
    inputs[key] = f.input;
    form.append(f.wrap);
  }
  const save = el("button", "", "Save what this chat is about");
  save.type = "submit";
  const row = el("div", "inline-row");
  row.append(save);
  if (state) row.append(el("span", "muted small", `${state.source} · ${formatDate(state.updated_at)}`));
  form.append(row);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {};
    for (const [key] of LIVE_FIELDS) body[key] = inputs[key].value;
    try {
      await apiJson("PUT", `/api/conversations/${c.id}/live-context`, body);
      await loadLive();
      report("Saved what this chat is about.");
    } catch (error) {
      report(error.message, "error");
    }
  });
  ui.live.append(form);
}

// -- fragments --------------------------------------------------------------------------------------
function fragmentEditor(form, f, onDone) {
  form.replaceChildren();
  const triggers = field("Triggers (comma-separated)", "text", { value: f ? f.triggers.join(", ") : "", required: true });
  const category = field("Category", "text", { value: f ? f.category : "", maxLength: 60 });
  const definition = field("Definition", "textarea", { value: f ? f.definition : "", maxLength: 4000, rows: 3, required: true });
  const enabled = field("Enabled", "checkbox", { value: f ? f.enabled : true });
  triggers.input.classList.add("fragment-triggers");
  const actions = el("div", "inline-row");
  const save = el("button", "primary", f ? "Save entry" : "Add entry");
  save.type = "submit";
  actions.append(save);
  if (f) actions.append(button("Cancel", () => onDone(false)));
  form.append(triggers.wrap, category.wrap, definition.wrap, enabled.wrap, actions);
  form.onsubmit = async (event) => {
    event.preventDefault();
    const body = {
      triggers: splitList(triggers.input.value), category: category.input.value.trim(),
      definition: definition.input.value.trim(), enabled: enabled.input.checked,
    };
    try {
      if (f) await apiJson("PATCH", `/api/fragments/${f.id}`, body);
      else await apiJson("POST", "/api/fragments", body);
      report(f ? "Lore entry saved." : "Lore entry added. It applies from the next message.");
      onDone(true);
    } catch (error) {
      report(error.message, "error");
    }
  };
}

async function loadFragments() {
  const chosen = ui.fragmentFilter.value;
  const [all] = await Promise.all([apiJson("GET", "/api/fragments"), loadBooks()]);
  const categories = [...new Set(all.map((f) => f.category).filter(Boolean))].sort();
  ui.fragmentFilter.replaceChildren(new Option("All", ""), ...categories.map((c) => new Option(c, c)));
  ui.fragmentFilter.value = categories.includes(chosen) ? chosen : "";
  fragments = ui.fragmentFilter.value ? all.filter((f) => f.category === ui.fragmentFilter.value) : all;
  renderFragments();
}

function renderFragments() {
  ui.fragments.replaceChildren();
  if (!fragments.length) ui.fragments.append(el("li", "muted empty", "No lore yet."));
  for (const f of fragments) {
    const item = el("li", "fragment");
    item.dataset.fragmentId = String(f.id);
    if (editingFragment === f.id) {
      const form = el("form", "fragment-edit");
      fragmentEditor(form, f, async (saved) => {
        editingFragment = null;
        if (saved) await loadFragments();
        else renderFragments();
      });
      item.append(form);
      ui.fragments.append(item);
      continue;
    }
    if (!f.enabled) item.classList.add("disabled");
    const head = el("div", "fragment-head");
    if (f.category) head.append(el("span", "chip", f.category));
    const triggers = el("span", "triggers");
    for (const t of f.triggers) triggers.append(el("span", "trigger", t));
    head.append(triggers);
    if (!f.enabled) head.append(el("span", "badge hidden-badge", "Off"));
    item.append(head);
    item.append(el("p", "fragment-definition", f.definition));
    const actions = el("div", "inline-row");
    actions.append(button("Edit", () => {
      editingFragment = f.id;
      renderFragments();
      ui.fragments.querySelector(`[data-fragment-id="${f.id}"] input`)?.focus();
    }, "quiet small", `Edit entry ${f.triggers.join(", ")}`));
    actions.append(confirmButton("Delete", "Confirm delete", async () => {
      try {
        await apiJson("DELETE", `/api/fragments/${f.id}`);
        await loadFragments();
        report("Lore entry deleted.");
      } catch (error) {
        report(error.message, "error");
      }
    }, `Delete entry ${f.triggers.join(", ")}`));
    item.append(actions);
    ui.fragments.append(item);
  }
}

// -- books: which personas each book (category) fires for (X3) -----------------------------------
const SCOPE_NAMES = { all: "every persona", character: "its character only", personas: "the chosen personas" };

async function loadBooks() {
  const [books, personas] = await Promise.all([
    apiJson("GET", "/api/fragments/books"), apiJson("GET", "/api/personas?include_archived=true"),
  ]);
  ui.books.replaceChildren();
  if (!books.length) ui.books.append(el("li", "muted empty", "No books yet: import a card's book or a World Info file, or give entries a category."));
  for (const b of books) ui.books.append(bookRow(b, personas));
}

function bookRow(b, personas) {
  const item = el("li", "fragment book");
  item.dataset.book = b.name;
  const head = el("div", "fragment-head");
  head.append(el("span", "chip", b.name), el("span", "muted small", `${b.fragments} ${b.fragments === 1 ? "entry" : "entries"}`));
  item.append(head);
  const character = personas.find((p) => p.id === b.character_id);
  const choices = [["all", "All personas"]];
  if (character) choices.push(["character", `Only ${character.display_name} (its character)`]);
  choices.push(["personas", "Chosen personas"]);
  const form = el("form", "book-scope");
  const scope = field(`Who “${b.name}” is for`, "select", { choices, value: b.scope === "character" && !character ? "personas" : b.scope });
  const picks = el("fieldset", "book-personas");
  picks.append(el("legend", "small", "Personas"));
  const boxes = personas.map((p) => {
    const box = field(p.display_name, "checkbox", { value: b.persona_ids.includes(p.id) });
    box.input.value = String(p.id);
    picks.append(box.wrap);
    return box.input;
  });
  const showPicks = () => { picks.hidden = scope.input.value !== "personas"; };
  scope.input.addEventListener("change", showPicks);
  showPicks();
  const save = el("button", "small", "Save");
  save.type = "submit";
  save.setAttribute("aria-label", `Save who “${b.name}” is for`);
  form.append(scope.wrap, picks, save);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { book: b.name, scope: scope.input.value, persona_ids: [] };
    if (body.scope === "personas") body.persona_ids = boxes.filter((box) => box.checked).map((box) => Number(box.value));
    try {
      const saved = await apiJson("PUT", "/api/fragments/books/scope", body);
      await loadBooks();
      report(`“${saved.name}” now fires for ${SCOPE_NAMES[saved.scope]}. It applies from the next message.`);
      ui.books.querySelector(`[data-book="${CSS.escape(saved.name)}"] select`)?.focus();
    } catch (error) {
      report(error.message, "error");
    }
  });
  item.append(form);
  return item;
}

function resetFragmentForm() {
  fragmentEditor(ui.fragmentForm, null, async () => {
    resetFragmentForm();
    await loadFragments();
    ui.fragmentForm.querySelector("input")?.focus();
  });
}

resetFragmentForm();

ui.fragmentFilter.addEventListener("change", () => loadFragments().catch((e) => report(e.message, "error")));
