// Prompt presets in the chat header (W3, P5): named texts the person saves once ("Be brief",
// "Roleplay narrator") and reuses. *Presets* (with the conversation actions, behind More on a phone)
// opens a panel under the header: which instructions the open conversation follows, each preset with
// *Use for this chat* (it becomes the conversation's custom instructions; the server rebuilds the
// stored prompt before answering) and *Insert* (its text goes into the message box at the cursor),
// *Delete*, and a form to save a new one. Preset names and texts are placed with textContent only.

import { $, apiJson, button, confirmButton, el, field, focusAfter, say } from "./api.js";
import { shared } from "./shared.js";

const state = shared;
const ui = {
  header: document.querySelector(".chat-header"),
  text: $("composer-text"),
};

const toggle = button("Presets", null, "quiet presets-toggle");
toggle.id = "presets-toggle";
toggle.setAttribute("aria-expanded", "false");
toggle.setAttribute("aria-controls", "presets-panel");
toggle.title = "Saved instructions to use in this conversation or insert into a message";
$("rename-conversation").before(toggle);

const panel = el("section", "presets-panel");
panel.id = "presets-panel";
panel.hidden = true;
panel.setAttribute("aria-labelledby", "presets-heading");
const heading = el("h2", "", "Prompt presets");
heading.id = "presets-heading";
heading.tabIndex = -1;
const close = button("Close", () => setOpen(false, true), "quiet small", "Close prompt presets");
const current = el("p", "presets-current");
current.id = "presets-current";
const useOwn = button("Use the persona's instructions", () => clearInstructions(), "quiet small");
const list = el("ul", "presets-list");
list.setAttribute("aria-label", "Saved presets");
const status = el("p", "status small");
status.setAttribute("role", "status");
status.setAttribute("aria-live", "polite");

// Saving a new one folds away once there are presets to choose from, so the list stays in view.
const adder = el("details", "presets-add");
const form = el("form", "presets-form");
const name = field("Name", "text", { maxLength: 100, required: true });
const text = field("Text", "textarea", { rows: 3, maxLength: 50000, required: true });
const save = el("button", "small", "Save preset");
save.type = "submit";
form.append(name.wrap, text.wrap, save);
adder.append(el("summary", "", "Save a new preset"), form);

const top = el("div", "presets-top");
top.append(heading, close);
const currentRow = el("div", "presets-current-row");
currentRow.append(current, useOwn);
panel.append(top, currentRow, list, status, adder);
ui.header.after(panel);

let presets = [];
let instructions = { text: null, preset_id: null }; // of the open conversation
let shownFor = null; // the conversation the panel was drawn for

const isOpen = () => toggle.getAttribute("aria-expanded") === "true";

function setOpen(open, refocus = false) {
  toggle.setAttribute("aria-expanded", String(open));
  panel.hidden = !open;
  if (open) {
    load().catch((error) => say(status, error.message, "error"));
    heading.focus();
  } else if (refocus) {
    // Presets lives in the header's More panel (W8): unfold it again so the focus has its button.
    const more = $("chat-more-toggle");
    if (!toggle.checkVisibility() && more?.getAttribute("aria-expanded") === "false") more.click();
    toggle.focus();
  }
}

async function load() {
  const c = state.current;
  const [all, own] = await Promise.all([
    apiJson("GET", "/api/presets"),
    c ? apiJson("GET", `/api/conversations/${c.id}/instructions`) : Promise.resolve({ text: null, preset_id: null }),
  ]);
  presets = all;
  instructions = own;
  shownFor = c ? c.id : null;
  draw();
}

function describeCurrent() {
  if (!state.current) return "Open a conversation to use a preset in it.";
  if (instructions.text === null) return "This conversation follows its persona's instructions.";
  const preset = presets.find((p) => p.id === instructions.preset_id);
  return preset ? `This conversation uses the preset “${preset.name}”.` : "This conversation has its own instructions.";
}

function draw() {
  const c = state.current;
  current.textContent = describeCurrent();
  useOwn.hidden = !c || instructions.text === null;
  const focusKey = list.contains(document.activeElement) ? document.activeElement.dataset.focusKey : null;
  list.replaceChildren();
  if (!presets.length) {
    list.append(el("li", "muted small", "No presets yet: save one below."));
    adder.open = true;
  }
  for (const preset of presets) {
    const item = el("li", "preset");
    item.dataset.presetId = String(preset.id);
    const words = el("div", "preset-words");
    const firstLine = preset.text.split("\n")[0];
    words.append(el("strong", "preset-name", preset.name), el("span", "preset-text muted small", firstLine));
    const actions = el("div", "preset-actions");
    const use = button("Use for this chat", () => applyPreset(preset), "small", `Use for this chat: ${preset.name}`);
    use.disabled = !c || instructions.preset_id === preset.id;
    use.dataset.focusKey = `use-${preset.id}`;
    const insert = button("Insert", () => insertPreset(preset), "quiet small", `Insert ${preset.name} into the message`);
    insert.disabled = ui.text.disabled;
    insert.dataset.focusKey = `insert-${preset.id}`;
    const remove = confirmButton("Delete", "Confirm delete", () => deletePreset(preset), `Delete ${preset.name}`);
    actions.append(use, insert, remove);
    item.append(words, actions);
    list.append(item);
  }
  if (focusKey) list.querySelector(`[data-focus-key="${focusKey}"]`)?.focus();
}

async function applyPreset(preset) {
  const c = state.current;
  if (!c) return;
  try {
    instructions = await apiJson("POST", `/api/presets/${preset.id}/apply`, { conversation_id: c.id });
    draw();
    say(status, `“${preset.name}” is now this conversation's instructions.`);
  } catch (error) {
    say(status, error.message, "error");
  }
}

async function clearInstructions() {
  const c = state.current;
  if (!c) return;
  const from = document.activeElement;
  try {
    instructions = await apiJson("PUT", `/api/conversations/${c.id}/instructions`, { text: null });
    draw();
    say(status, "This conversation follows its persona's instructions again.");
    focusAfter(heading, from);
  } catch (error) {
    say(status, error.message, "error");
  }
}

// The text goes in at the cursor (replacing a selection), as if typed: drafts.js keeps it.
function insertPreset(preset) {
  const box = ui.text;
  if (box.disabled) return;
  const start = box.selectionStart ?? box.value.length;
  const end = box.selectionEnd ?? box.value.length;
  box.setRangeText(preset.text, start, end, "end");
  box.dispatchEvent(new Event("input", { bubbles: true }));
  setOpen(false);
  box.focus();
}

async function deletePreset(preset) {
  try {
    await apiJson("DELETE", `/api/presets/${preset.id}`);
    presets = presets.filter((p) => p.id !== preset.id);
    if (instructions.preset_id === preset.id) instructions = { ...instructions, preset_id: null };
    draw();
    heading.focus();
    say(status, `Preset “${preset.name}” deleted. Conversations that use its text keep it.`);
  } catch (error) {
    say(status, error.message, "error");
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  save.disabled = true;
  try {
    const made = await apiJson("POST", "/api/presets", { name: name.input.value, text: text.input.value });
    presets = [...presets, made].sort((a, b) => a.name.toLowerCase().localeCompare(b.name.toLowerCase()));
    name.input.value = "";
    text.input.value = "";
    draw();
    say(status, `Preset “${made.name}” saved.`);
  } catch (error) {
    say(status, error.message, "error");
  } finally {
    save.disabled = false;
  }
});

toggle.addEventListener("click", () => setOpen(!isOpen(), isOpen()));
panel.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  event.stopPropagation(); // closing the panel never also stops a streaming reply
  setOpen(false, true);
});

// Called by the chat header each time it is drawn (chat.js): another thread's instructions.
export function renderPresets() {
  const c = state.current;
  toggle.disabled = !c;
  if (!c && isOpen()) setOpen(false);
  if (isOpen() && shownFor !== (c ? c.id : null)) load().catch((error) => say(status, error.message, "error"));
  else if (isOpen()) {
    const insertable = !ui.text.disabled;
    for (const node of list.querySelectorAll("button[data-focus-key^=insert-]")) node.disabled = !insertable;
  }
}
