// Memory panel: the long-term list in its manual global order. Reorder by drag and drop or with the
// move up / move down buttons (keyboard); add, edit, delete; category, importance, visible/hidden.
// Every memory keeps its versions (B1, B2): History lists them (what, when, by whom) with Restore,
// Undo brings back the previous version, and an edit is a new meaning unless marked as a typo fix.

import { $, apiJson, button, confirmButton, el, field, say } from "./api.js";

const ui = {
  form: $("memory-add"),
  text: $("memory-text"),
  category: $("memory-category"),
  importance: $("memory-importance"),
  visible: $("memory-visible"),
  status: $("memory-status"),
  list: $("memory-list"),
};

let memories = [];
let editing = null;
let dragId = null;
const histories = new Map(); // memory id -> versions, for the memories whose history is open

const short = (text) => (text.length > 40 ? `${text.slice(0, 40)}…` : text);

export async function showMemory() {
  memories = await apiJson("GET", "/api/memories");
  render();
}

function rebuiltNote(count) {
  return count ? ` ${count} stored ${count === 1 ? "prompt was" : "prompts were"} rebuilt.` : "";
}

function render(focus) {
  ui.list.replaceChildren();
  if (!memories.length) ui.list.append(el("li", "muted empty", "No memories yet. Add the first one above."));
  memories.forEach((m, index) => ui.list.append(m.id === editing ? editItem(m) : viewItem(m, index)));
  if (focus) {
    // Keep the keyboard where it was: the same control on the moved or edited memory.
    const row = ui.list.querySelector(`[data-id="${focus.id}"]`);
    const target = row && row.querySelector(`.${focus.cls}`);
    if (target && !target.disabled) target.focus();
    else if (row) row.querySelector("button:not(:disabled), textarea")?.focus();
  }
}

function viewItem(m, index) {
  const item = el("li", "memory-item");
  item.dataset.id = String(m.id);
  item.draggable = true;
  if (!m.eligible) item.classList.add("is-hidden");
  item.append(el("span", "drag-handle", "⋮⋮"));
  item.lastChild.setAttribute("aria-hidden", "true");

  const main = el("div", "memory-main");
  main.append(el("p", "memory-text", m.text));
  const meta = el("p", "memory-meta");
  meta.append(el("span", "position", `#${m.position}`));
  if (m.category) meta.append(el("span", "chip", m.category));
  meta.append(el("span", "", `Importance ${m.importance}`));
  meta.append(el("span", m.eligible ? "" : "badge hidden-badge", m.eligible ? "Visible" : "Hidden"));
  if (m.valid_until) meta.append(el("span", "badge ended-badge", `Ended ${m.valid_until.slice(0, 10)}`));
  if (m.version > 1) meta.append(el("span", "version", `Version ${m.version}`));
  main.append(meta);
  if (histories.has(m.id)) main.append(historyList(m));
  item.append(main);

  const actions = el("div", "memory-actions");
  const up = button("↑", () => move(m.id, m.position - 1, "move-up"), "quiet icon move-up", `Move up: ${short(m.text)}`);
  up.disabled = index === 0;
  const down = button("↓", () => move(m.id, m.position + 1, "move-down"), "quiet icon move-down",
    `Move down: ${short(m.text)}`);
  down.disabled = index === memories.length - 1;
  const edit = button("Edit", () => {
    editing = m.id;
    render({ id: m.id, cls: "memory-edit-text" });
  }, "quiet edit", `Edit: ${short(m.text)}`);
  const remove = confirmButton("Delete", "Confirm delete", () => removeMemory(m), `Delete: ${short(m.text)}`);
  const history = button(histories.has(m.id) ? "Hide history" : "History", () => toggleHistory(m), "quiet history",
    `History: ${short(m.text)}`);
  history.setAttribute("aria-expanded", String(histories.has(m.id)));
  actions.append(up, down, edit, history);
  if (m.version > 1) {
    actions.append(button("Undo", () => undo(m), "quiet undo", `Undo the last change: ${short(m.text)}`));
  }
  actions.append(remove);
  item.append(actions);

  item.addEventListener("dragstart", (event) => {
    dragId = m.id;
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", String(m.id));
    item.classList.add("dragging");
  });
  item.addEventListener("dragend", () => {
    dragId = null;
    item.classList.remove("dragging");
    for (const node of ui.list.querySelectorAll(".drop-target")) node.classList.remove("drop-target");
  });
  item.addEventListener("dragover", (event) => {
    if (dragId === null || dragId === m.id) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    item.classList.add("drop-target");
  });
  item.addEventListener("dragleave", () => item.classList.remove("drop-target"));
  item.addEventListener("drop", (event) => {
    event.preventDefault();
    item.classList.remove("drop-target");
    const id = Number(event.dataTransfer.getData("text/plain")) || dragId;
    if (id && id !== m.id) move(id, m.position, "drag-handle");
  });
  return item;
}

function editItem(m) {
  const item = el("li", "memory-item editing");
  item.dataset.id = String(m.id);
  const form = el("form", "memory-edit");
  const text = field("Memory", "textarea", { value: m.text, maxLength: 10000, rows: 3 });
  text.input.classList.add("memory-edit-text");
  text.input.required = true;
  const category = field("Category", "text", { value: m.category, maxLength: 100 });
  const importance = field("Importance (0–10)", "number", { value: m.importance, min: 0, max: 10, className: "narrow" });
  const visible = field("Visible to companions", "checkbox", { value: m.eligible });
  const correction = field("Typo fix (corrects this version instead of recording a change)", "checkbox",
    { value: false });
  correction.input.classList.add("memory-correction");
  const row = el("div", "form-row");
  row.append(category.wrap, importance.wrap, visible.wrap, correction.wrap);
  const actions = el("div", "inline-row");
  const save = el("button", "primary", "Save");
  save.type = "submit";
  actions.append(save, button("Cancel", () => {
    editing = null;
    render({ id: m.id, cls: "edit" });
  }));
  form.append(text.wrap, row, actions);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const body = {
        category: category.input.value, importance: Number(importance.input.value), eligible: visible.input.checked,
        correction: correction.input.checked,
      };
      if (text.input.value.trim() !== m.text) body.text = text.input.value;
      const saved = await apiJson("PATCH", `/api/memories/${m.id}`, body);
      editing = null;
      histories.delete(m.id);
      memories = memories.map((x) => (x.id === m.id ? saved.memory : x));
      render({ id: m.id, cls: "edit" });
      say(ui.status, `Memory saved.${rebuiltNote(saved.prompts_rebuilt)}`, "success");
    } catch (error) {
      say(ui.status, error.message, "error");
    }
  });
  item.append(form);
  return item;
}

function historyList(m) {
  const list = el("ol", "memory-history");
  list.setAttribute("aria-label", `Versions of: ${short(m.text)}`);
  for (const v of histories.get(m.id)) {
    const row = el("li", "memory-version");
    const until = v.valid_until ? v.valid_until.slice(0, 10) : "now";
    const who = { owner: "you", suggestion: "an approved suggestion", auto: "an auto-approved suggestion",
      import: "an import" }[v.actor] || "unknown";
    row.append(el("span", "version-label", `v${v.version} · ${v.change} by ${who} · ${v.recorded_at.slice(0, 10)}`));
    row.append(el("span", "muted small", ` true ${v.valid_from.slice(0, 10)} – ${until}${v.retired_at ? " · corrected" : ""}`));
    row.append(el("p", "version-text", v.text));
    if (v.version !== m.version) {
      row.append(button("Restore", () => restore(m, v.version), "quiet small restore",
        `Restore version ${v.version} of: ${short(m.text)}`));
    }
    list.append(row);
  }
  return list;
}

async function toggleHistory(m) {
  if (histories.has(m.id)) {
    histories.delete(m.id);
    render({ id: m.id, cls: "history" });
    return;
  }
  try {
    histories.set(m.id, await apiJson("GET", `/api/memories/${m.id}/history`));
    render({ id: m.id, cls: "history" });
  } catch (error) {
    say(ui.status, error.message, "error");
  }
}

async function restore(m, version) {
  try {
    const saved = await apiJson("POST", `/api/memories/${m.id}/restore`, { version });
    memories = memories.map((x) => (x.id === m.id ? saved.memory : x));
    if (histories.has(m.id)) histories.set(m.id, await apiJson("GET", `/api/memories/${m.id}/history`));
    render({ id: m.id, cls: "history" });
    say(ui.status, `Version ${version} restored as version ${saved.memory.version}.${rebuiltNote(saved.prompts_rebuilt)}`,
      "success");
  } catch (error) {
    say(ui.status, error.message, "error");
  }
}

async function undo(m) {
  try {
    const versions = await apiJson("GET", `/api/memories/${m.id}/history`);
    const previous = versions.find((v) => v.version < m.version);
    if (previous) await restore(m, previous.version);
  } catch (error) {
    say(ui.status, error.message, "error");
  }
}

async function move(id, position, focusClass) {
  if (position < 1 || position > memories.length) return;
  try {
    memories = await apiJson("POST", `/api/memories/${id}/move`, { position });
    render({ id, cls: focusClass });
    const moved = memories.find((m) => m.id === id);
    say(ui.status, `Moved “${short(moved.text)}” to position ${moved.position} of ${memories.length}.`, "success");
  } catch (error) {
    say(ui.status, error.message, "error");
  }
}

async function removeMemory(m) {
  try {
    const result = await apiJson("DELETE", `/api/memories/${m.id}`);
    memories = await apiJson("GET", "/api/memories");
    render();
    say(ui.status, `Memory deleted.${rebuiltNote(result.prompts_rebuilt)}`, "success");
  } catch (error) {
    say(ui.status, error.message, "error");
  }
}

ui.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    const result = await apiJson("POST", "/api/memories", {
      text: ui.text.value, category: ui.category.value,
      importance: Number(ui.importance.value || 0), eligible: ui.visible.checked,
    });
    ui.text.value = "";
    memories = await apiJson("GET", "/api/memories");
    render();
    if (result && result.queued_for_review) {
      const c = result.queued_for_review.payload.conflict;
      say(ui.status, `Not added yet: it ${c.relation === "contradiction" ? "contradicts" : "repeats"} “${short(c.existing_text)}”.`
        + " It waits in the review queue: merge, supersede or keep both.", "info");
    } else {
      say(ui.status, "Memory added. New threads will include it; use Refresh memory for an open one.", "success");
    }
    ui.text.focus();
  } catch (error) {
    say(ui.status, error.message, "error");
  }
});
