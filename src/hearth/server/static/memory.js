// Memory panel: the long-term list in its manual global order. Reorder by drag and drop or with the
// move up / move down buttons (keyboard); add, edit, delete; category, importance, visible/hidden.

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
  main.append(meta);
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
  actions.append(up, down, edit, remove);
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
  const row = el("div", "form-row");
  row.append(category.wrap, importance.wrap, visible.wrap);
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
      const saved = await apiJson("PATCH", `/api/memories/${m.id}`, {
        text: text.input.value, category: category.input.value,
        importance: Number(importance.input.value), eligible: visible.input.checked,
      });
      editing = null;
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
    await apiJson("POST", "/api/memories", {
      text: ui.text.value, category: ui.category.value,
      importance: Number(ui.importance.value || 0), eligible: ui.visible.checked,
    });
    ui.text.value = "";
    memories = await apiJson("GET", "/api/memories");
    render();
    say(ui.status, "Memory added. New threads will include it; use Refresh memory for an open one.", "success");
    ui.text.focus();
  } catch (error) {
    say(ui.status, error.message, "error");
  }
});
