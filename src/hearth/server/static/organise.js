// Organising the open thread (W4): Pin / Unpin in the header, its tags as chips (a chip finds the
// threads with that tag; × removes it) with an Add tag field, and the notice of an imported thread,
// which is read only: no message box, and "Continue in a new chat" (branch.js) carries its last turns
// into a new thread. Tags are placed with textContent, like every other text of the person's.

import { $, apiJson, button, el, focusAfter } from "./api.js";
import { conversationTitle, setStatus, shared } from "./shared.js";
import { loadConversations, searchFor } from "./threads.js";

const ui = {
  pin: $("pin-conversation"),
  tags: $("chat-tags"),
  imported: $("imported-notice"),
  continueChat: $("imported-continue"),
  composer: $("composer"),
  messages: $("messages"),
};

const state = shared;
let adding = null; // the id of the thread whose Add tag field is open
let known = []; // the person's tags, offered while typing one

// Called by the chat header each time it is drawn.
export function renderOrganise() {
  const c = state.current;
  ui.pin.disabled = !c || c.visibility === "trashed";
  ui.pin.textContent = c && c.pinned_at ? "Unpin" : "Pin";
  ui.pin.title = c && c.pinned_at ? "Take this conversation out of the Pinned group" : "List this conversation first, under Pinned";
  const imported = Boolean(c && c.imported);
  ui.imported.hidden = !imported;
  ui.continueChat.disabled = Boolean(state.branching || state.sending);
  ui.composer.hidden = imported;
  ui.messages.classList.toggle("read-only", imported); // no Edit or Regenerate on a kept history
  renderTags(c);
}

let drawn = ""; // what the tag row shows: the header is drawn often, and a field being typed in must stay

function renderTags(c) {
  const key = c ? JSON.stringify([c.id, c.tags, adding === c.id]) : "";
  if (key === drawn && c) return;
  drawn = key;
  const focused = ui.tags.contains(document.activeElement) ? document.activeElement.dataset.focusKey : null;
  ui.tags.hidden = !c;
  ui.tags.replaceChildren();
  if (!c) return;
  for (const tag of c.tags || []) {
    const chip = el("span", "chip tag-chip");
    const find = button(tag, () => searchFor(`tag:${tag}`), "quiet small chip-find", `Find conversations tagged ${tag}`);
    const remove = button("×", () => changeTag(c, "DELETE", tag), "quiet small icon chip-remove", `Remove tag ${tag}`);
    remove.dataset.focusKey = `remove-${tag}`;
    chip.append(find, remove);
    ui.tags.append(chip);
  }
  if (adding === c.id) ui.tags.append(tagForm(c));
  else {
    const open = button("Add tag", () => {
      adding = c.id;
      renderTags(c);
      ui.tags.querySelector("input").focus();
      loadKnown();
    }, "quiet small add-tag");
    open.dataset.focusKey = "add";
    ui.tags.append(open);
  }
  if (focused) {
    const again = ui.tags.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`);
    (again || ui.tags.querySelector(".add-tag, input"))?.focus();
  }
}

function tagForm(c) {
  const form = el("form", "tag-form");
  const label = el("label", "visually-hidden", "New tag");
  const input = el("input");
  input.id = "tag-input";
  input.maxLength = 40;
  input.autocomplete = "off";
  input.placeholder = "tag";
  input.setAttribute("list", "tag-choices");
  label.htmlFor = input.id;
  const choices = el("datalist");
  choices.id = "tag-choices";
  for (const t of known) if (!(c.tags || []).includes(t.tag)) choices.append(new Option(t.tag));
  const save = el("button", "small", "Add");
  save.type = "submit";
  const close = () => {
    adding = null;
    renderTags(state.current);
    ui.tags.querySelector(".add-tag")?.focus();
  };
  form.append(label, input, choices, save, button("Done", close, "quiet small"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!input.value.trim()) return;
    await changeTag(c, "POST", input.value.trim());
    ui.tags.querySelector("input")?.focus(); // the field stays open for the next tag
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") close();
  });
  return form;
}

async function loadKnown() {
  try {
    known = await apiJson("GET", "/api/conversations/tags");
    const list = ui.tags.querySelector("datalist");
    if (list && state.current) {
      list.replaceChildren(...known.filter((t) => !state.current.tags.includes(t.tag)).map((t) => new Option(t.tag)));
    }
  } catch (_) {
    known = []; // suggestions only: the field works without them
  }
}

async function changeTag(c, method, tag) {
  const path = method === "POST" ? `/api/conversations/${c.id}/tags` : `/api/conversations/${c.id}/tags/${encodeURIComponent(tag)}`;
  try {
    const updated = await apiJson(method, path, method === "POST" ? { tag } : undefined);
    if (state.current && state.current.id === c.id) {
      state.current = updated;
      renderTags(updated);
    }
    setStatus(method === "POST" ? `Tag added to “${conversationTitle(updated)}”.` : `Tag ${tag} removed.`);
    if (method === "DELETE") ui.tags.querySelector(".add-tag, input")?.focus();
    await loadConversations(); // the list's chips
  } catch (error) {
    setStatus(error.message, "error");
  }
}

ui.pin.addEventListener("click", async () => {
  const c = state.current;
  if (!c) return;
  const from = document.activeElement;
  ui.pin.disabled = true;
  try {
    const updated = await apiJson("POST", `/api/conversations/${c.id}/${c.pinned_at ? "unpin" : "pin"}`);
    if (state.current && state.current.id === c.id) state.current = updated;
    renderOrganise();
    await loadConversations();
    setStatus(updated.pinned_at ? `Pinned “${conversationTitle(updated)}”: it is listed first.`
      : `Unpinned “${conversationTitle(updated)}”.`);
    focusAfter(ui.pin, from);
  } catch (error) {
    setStatus(error.message, "error");
    renderOrganise();
  }
});
