// The thread list (the chat's sidebar): conversations outside folders, folder groups (hide and
// show, rename, delete), the trash with Restore, a filter by title, persona and folder, and the New
// Chat and New folder forms. Every list is paged with a cursor (W4): the page loads one page of
// threads per list, "Show more" the next, so the list works the same with ten threads or 100,000.
// Pinned threads have a group of their own above the others. The filter's words find titles and
// message text (each match shows its message's snippet, as text); tag:NAME filters by tag.

import { $, apiJson, button, el, focusAfter, formatDate } from "./api.js";
import { avatarFor } from "./avatars.js";
import { forgetControl, periodForm } from "./forget.js";
import { conversationTitle, openConversation, setStatus, shared } from "./shared.js";
import { closePanels } from "./layout.js";

const ui = {
  pinnedSection: $("pinned-section"),
  pinnedList: $("pinned-list"),
  pinnedMore: $("pinned-more"),
  list: $("conversation-list"),
  listHeading: $("conversation-list-heading"),
  more: $("conversation-more"),
  foldersSection: $("folders-section"),
  folderGroups: $("folder-groups"),
  newFolder: $("new-folder"),
  newFolderName: $("new-folder-name"),
  trash: $("trash"),
  trashList: $("trash-list"),
  trashMore: $("trash-more"),
  trashCount: $("trash-count"),
  newForm: $("new-conversation"),
  newTitle: $("new-title"),
  newContinue: $("new-continue"),
  personaField: $("persona-field"),
  personaSelect: $("persona-select"),
  filter: $("thread-filter"),
  filterText: $("filter-text"),
  filterPersona: $("filter-persona"),
  filterFolder: $("filter-folder"),
};

const PAGE = 50;
const state = shared;
const collapsed = new Set(JSON.parse(sessionStorage.getItem("hearth.collapsed") || "[]"));

// One paged list per place in the sidebar: key -> {params, items, more, wanted}.
const lists = new Map();

// What the list needs from the open conversation, given by the chat module (so the two do not import
// each other): selectConversation(id), refreshCurrent(), afterListRender().
let chat = { selectConversation: async () => {}, refreshCurrent: async () => {}, afterListRender: () => {} };

export function connectChat(handlers) {
  chat = handlers;
}

function filtering() {
  return Boolean(ui.filterText.value.trim() || ui.filterPersona.value || ui.filterFolder.value);
}

function mainParams() {
  if (!filtering()) return { loose: "true", pinned: "false" }; // pinned ones have their own group
  const params = {};
  if (ui.filterText.value.trim()) params.q = ui.filterText.value.trim();
  if (ui.filterPersona.value) params.persona_id = ui.filterPersona.value;
  if (ui.filterFolder.value === "none") params.loose = "true";
  else if (ui.filterFolder.value) params.folder_id = ui.filterFolder.value;
  return params;
}

async function fetchPage(params, after, limit) {
  const query = new URLSearchParams({ ...params, limit: String(limit) });
  if (after) {
    query.set("before_updated_at", after.updated_at);
    query.set("before_id", String(after.id));
  }
  return apiJson("GET", `/api/conversations?${query}`);
}

// (Re)loads a list with as many threads as it showed before, so an action never shrinks the view.
// Only the newest request of a list is kept: typing into the filter asks again on every pause, and an
// earlier, slower answer must not replace a later one.
const asked = new Map();

async function loadList(key, params) {
  const ticket = (asked.get(key) || 0) + 1;
  asked.set(key, ticket);
  const old = lists.get(key);
  const wanted = old && JSON.stringify(old.params) === JSON.stringify(params) ? old.wanted : PAGE;
  const items = await fetchPage(params, null, Math.min(wanted, 1000));
  if (asked.get(key) !== ticket) return;
  lists.set(key, { params, items, more: items.length >= wanted, wanted });
}

async function loadMore(key) {
  const list = lists.get(key);
  const page = await fetchPage(list.params, list.items[list.items.length - 1], PAGE);
  list.items = list.items.concat(page);
  list.wanted += PAGE;
  list.more = page.length >= PAGE;
  remember();
  renderList();
}

function remember() {
  const known = new Map();
  for (const list of lists.values()) for (const c of list.items) known.set(c.id, c);
  if (state.current && !known.has(state.current.id)) known.set(state.current.id, state.current);
  state.conversations = [...known.values()];
}

// The words of the filter, for marking them in a match's snippet (tag: parts filter, they are not words).
function filterWords() {
  const text = ui.filterText.value.split(/\s+/).filter((w) => !/^tag:/i.test(w)).join(" ");
  return [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]{2,}/gu) || [])];
}

// The snippet as text nodes, each word of the filter in a <mark>; never parsed as HTML.
function snippetNode(text, words) {
  const node = el("span", "conversation-snippet");
  if (!words.length) {
    node.textContent = text;
    return node;
  }
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(?:${words.join("|")})[\\p{L}\\p{N}]*`, "giu"); // the whole word
  let at = 0;
  for (const found of text.matchAll(pattern)) {
    node.append(document.createTextNode(text.slice(at, found.index)), el("mark", "", found[0]));
    at = found.index + found[0].length;
  }
  node.append(document.createTextNode(text.slice(at)));
  return node;
}

async function togglePin(c) {
  const from = document.activeElement;
  try {
    await apiJson("POST", `/api/conversations/${c.id}/${c.pinned_at ? "unpin" : "pin"}`);
    if (state.current && state.current.id === c.id) await chat.refreshCurrent();
    else await loadConversations();
    setStatus(c.pinned_at ? `Unpinned “${conversationTitle(c)}”.` : `Pinned “${conversationTitle(c)}”.`);
    focusAfter(document.querySelector(`#threads .pin-toggle[data-id="${c.id}"]`), from);
  } catch (error) {
    setStatus(error.message, "error");
  }
}

function conversationButton(c, { pinnable = true } = {}) {
  const item = el("li");
  const node = el("button", "conversation has-avatar");
  node.type = "button";
  node.dataset.id = String(c.id);
  node.append(avatarFor(c.persona_id, { labelled: true })); // the row names no persona otherwise
  if (state.current && state.current.id === c.id) node.setAttribute("aria-current", "true");
  const top = el("span", "conversation-top");
  const title = el("span", "conversation-title", conversationTitle(c));
  title.title = conversationTitle(c); // the list shows one line; the whole title on hover
  top.append(title);
  if (c.continuity_shielded) top.append(el("span", "badge shield-badge", "Shielded"));
  if (c.pinned_at && filtering()) top.append(el("span", "badge", "Pinned"));
  node.append(top);
  const when = formatDate(c.updated_at);
  const meta = c.state === "ended" ? `Ended · ${when}` : when;
  node.append(el("span", "conversation-meta", c.imported ? `Imported · ${meta}` : meta));
  if (c.tags && c.tags.length) {
    const chips = el("span", "conversation-tags");
    for (const tag of c.tags) chips.append(el("span", "chip tag-chip", tag));
    node.append(chips);
  }
  if (c.match) node.append(snippetNode(c.match.snippet, filterWords()));
  node.addEventListener("click", () => {
    openConversation(c.id);
    closePanels(); // on a phone the drawer closes on a choice
  });
  item.append(node);
  if (pinnable) {
    const pin = button(c.pinned_at ? "Unpin" : "Pin", () => togglePin(c), "quiet small pin-toggle",
      `${c.pinned_at ? "Unpin" : "Pin"} ${conversationTitle(c)}`);
    pin.dataset.id = String(c.id);
    item.classList.add("pinnable");
    item.append(pin);
  }
  return item;
}

// The filter box set from elsewhere (a tag chip of the open thread): the list shows what it finds.
export function searchFor(text) {
  ui.filterText.value = text;
  refilter();
}

function moreButton(key, label) {
  return button(label, () => loadMore(key).catch((error) => setStatus(error.message, "error")), "quiet small more");
}

// The open thread marked in the drawn lists (opening a thread changes nothing else in them).
export function markCurrent(id) {
  for (const node of document.querySelectorAll("#threads .conversation[data-id]")) {
    if (Number(node.dataset.id) === id) node.setAttribute("aria-current", "true");
    else node.removeAttribute("aria-current");
  }
}

export function renderList() {
  const main = lists.get("main") || { items: [], more: false };
  const searching = filtering();
  ui.listHeading.textContent = searching ? "Matching conversations" : "Conversations";
  ui.foldersSection.hidden = searching;
  const pinned = lists.get("pinned") || { items: [], more: false };
  ui.pinnedSection.hidden = searching || !pinned.items.length;
  ui.pinnedList.replaceChildren(...pinned.items.map((c) => conversationButton(c)));
  ui.pinnedMore.hidden = !pinned.more;
  ui.list.replaceChildren();
  if (!main.items.length) {
    ui.list.append(el("li", "muted empty", searching ? "No conversation matches."
      : state.folders.length ? "No conversations outside folders."
        : pinned.items.length ? "No other conversations." : "No conversations yet."));
  }
  ui.list.append(...main.items.map((c) => conversationButton(c)));
  ui.more.hidden = !main.more;

  ui.folderGroups.replaceChildren();
  for (const folder of state.folders) ui.folderGroups.append(folderGroup(folder));
  if (!state.folders.length) ui.folderGroups.append(el("p", "muted empty", "No folders yet."));

  const trash = lists.get("trash") || { items: [], more: false };
  ui.trashList.replaceChildren();
  ui.trashCount.textContent = trash.items.length ? `${trash.items.length}${trash.more ? "+" : ""}` : "";
  if (!trash.items.length) ui.trashList.append(el("li", "muted empty", "The trash is empty."));
  for (const c of trash.items) {
    const item = conversationButton(c, { pinnable: false });
    item.classList.add("trashed");
    item.append(button("Restore", () => restoreConversation(c.id), "quiet small",
      `Restore ${conversationTitle(c)}`));
    item.append(forgetControl("Delete forever", { target: "conversation", id: c.id },
      `Delete ${conversationTitle(c)} forever`, loadConversations, setStatus));
    ui.trashList.append(item);
  }
  if (trash.items.length) {
    const empty = el("li", "trash-empty");
    empty.append(forgetControl("Empty trash", { target: "trash" }, "Empty the trash forever", loadConversations, setStatus));
    ui.trashList.append(empty);
  }
  ui.trashMore.hidden = !trash.more;
  renderFilterChoices();
  chat.afterListRender();
}

function folderGroup(folder) {
  const key = `folder-${folder.id}`;
  const members = lists.get(key) || { items: [], more: false };
  const group = el("section", "folder");
  group.dataset.folderId = String(folder.id);
  const head = el("div", "folder-head");
  const open = !collapsed.has(folder.id);
  const toggle = button(`${folder.name}`, async () => {
    const from = document.activeElement;
    if (collapsed.has(folder.id)) collapsed.delete(folder.id);
    else collapsed.add(folder.id);
    sessionStorage.setItem("hearth.collapsed", JSON.stringify([...collapsed]));
    if (!collapsed.has(folder.id)) await loadList(key, folderParams(folder)).catch(() => {});
    remember();
    renderList();
    focusAfter(ui.folderGroups.querySelector(`[data-folder-id="${folder.id}"] .folder-toggle`), from);
  }, "folder-toggle");
  toggle.setAttribute("aria-expanded", String(open));
  toggle.prepend(el("span", "chevron", open ? "▾" : "▸"));
  if (open) toggle.append(el("span", "count", `${members.items.length}${members.more ? "+" : ""}`));
  head.append(toggle);
  if (folder.hidden) head.append(el("span", "badge hidden-badge", "Hidden"));
  head.append(button(folder.hidden ? "Show" : "Hide", () => setFolderHidden(folder, !folder.hidden), "quiet small",
    `${folder.hidden ? "Show" : "Hide"} folder ${folder.name}`));
  head.append(forgetControl("Delete forever", { target: "folder", id: folder.id }, `Delete folder ${folder.name} forever`,
    loadConversations, setStatus));
  const tools = el("div", "folder-tools");
  tools.append(button("Rename", () => renameFolder(group, folder), "quiet small", `Rename folder ${folder.name}`));
  tools.append(button("Delete", () => askDeleteFolder(group, folder), "quiet small danger",
    `Delete folder ${folder.name}`));
  group.append(head, tools);
  if (open) {
    const list = el("ul", "conversation-list");
    if (!members.items.length) list.append(el("li", "muted empty", "Empty."));
    for (const c of members.items) list.append(conversationButton(c));
    group.append(list);
    if (members.more) group.append(moreButton(key, `Show more in ${folder.name}`));
  }
  return group;
}

function renameFolder(group, folder) {
  const form = el("form", "inline-form folder-rename");
  const label = el("label", "visually-hidden", `New name for ${folder.name}`);
  const input = el("input");
  input.id = `folder-name-${folder.id}`;
  label.htmlFor = input.id;
  input.value = folder.name;
  input.maxLength = 200;
  input.required = true;
  const save = el("button", "small", "Save name");
  save.type = "submit";
  const row = el("div", "inline-row");
  row.append(input, save, button("Cancel", () => renderList(), "quiet small"));
  form.append(label, row);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await apiJson("PATCH", `/api/folders/${folder.id}`, { name: input.value });
      await loadConversations();
      setStatus(`Folder renamed to “${input.value.trim()}”.`);
    } catch (error) {
      setStatus(error.message, "error");
    }
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") renderList();
  });
  group.querySelector(".folder-tools").replaceChildren(form);
  input.select();
}

// Deleting asks what happens to the folder's threads: they leave the folder, or go to the trash.
function askDeleteFolder(group, folder) {
  const box = el("div", "folder-delete");
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", `Delete folder ${folder.name}`);
  box.append(el("p", "small", `Delete “${folder.name}”? Its conversations:`));
  const row = el("div", "inline-row");
  row.append(
    button("Keep them (move out)", () => deleteFolder(folder, "keep"), "quiet small"),
    button("Move them to the trash", () => deleteFolder(folder, "trash"), "quiet small danger"),
    button("Cancel", () => renderList(), "quiet small"),
  );
  box.append(row);
  group.querySelector(".folder-tools").replaceChildren(box);
  row.querySelector("button").focus();
}

async function deleteFolder(folder, threads) {
  try {
    const result = await apiJson("DELETE", `/api/folders/${folder.id}?threads=${threads}`);
    lists.delete(`folder-${folder.id}`);
    await loadConversations();
    if (state.current && state.current.folder_id === folder.id) await chat.refreshCurrent();
    const n = result.conversations;
    const noun = n === 1 ? "conversation" : "conversations";
    setStatus(threads === "trash" ? `Folder deleted; ${n} ${noun} moved to the trash.`
      : `Folder deleted; ${n} ${noun} kept outside folders.`);
  } catch (error) {
    setStatus(error.message, "error");
  }
}

function renderFilterChoices() {
  const persona = ui.filterPersona.value;
  ui.filterPersona.replaceChildren(new Option("All personas", ""));
  for (const p of state.personas) ui.filterPersona.append(new Option(p.display_name, String(p.id)));
  ui.filterPersona.value = persona;
  ui.filterPersona.hidden = state.personas.length < 2;
  const folder = ui.filterFolder.value;
  ui.filterFolder.replaceChildren(new Option("All folders", ""), new Option("No folder", "none"));
  for (const f of state.folders) ui.filterFolder.append(new Option(f.name, String(f.id)));
  ui.filterFolder.value = [...ui.filterFolder.options].some((o) => o.value === folder) ? folder : "";
}

const folderParams = (folder) => ({ folder_id: String(folder.id), pinned: "false" });

export async function loadConversations() {
  // The main list does not depend on the folders: both requests travel together.
  const main = loadList("main", mainParams());
  main.catch(() => {}); // awaited below, where a failure is reported
  const pinned = filtering() ? null : loadList("pinned", { pinned: "true" });
  if (pinned) pinned.catch(() => {});
  state.folders = await apiJson("GET", "/api/folders");
  // The trash loads once it is opened: most visits never look, and it costs a scan.
  const loads = [main];
  if (pinned) loads.push(pinned);
  if (ui.trash.open) loads.push(loadList("trash", { trashed: "true" }));
  for (const folder of state.folders) {
    if (!collapsed.has(folder.id)) loads.push(loadList(`folder-${folder.id}`, folderParams(folder)));
  }
  await Promise.all(loads);
  remember();
  renderList();
}

export async function loadPersonas() {
  state.personas = await apiJson("GET", "/api/personas?include_archived=true");
  ui.personaSelect.replaceChildren();
  for (const p of state.personas.filter((x) => !x.archived_at)) {
    const option = el("option", "", p.display_name);
    option.value = String(p.id);
    ui.personaSelect.append(option);
  }
  ui.personaField.hidden = ui.personaSelect.options.length < 2;
  showPicked();
  if (lists.size) renderList(); // the list may have been drawn before the personas (and avatars) came
}

// The New Chat picker shows the chosen persona's avatar beside its name.
function showPicked() {
  const old = ui.personaField.querySelector(".persona-avatar");
  const id = Number(ui.personaSelect.value);
  const node = avatarFor(id);
  if (old) old.replaceWith(node);
  else ui.personaSelect.before(node);
}

// New Chat starts with the open thread's persona (the picker follows the thread).
export function followPersona(personaId) {
  if ([...ui.personaSelect.options].some((o) => o.value === String(personaId))) {
    ui.personaSelect.value = String(personaId);
    showPicked();
  }
}

async function setFolderHidden(folder, hidden) {
  try {
    await apiJson("PATCH", `/api/folders/${folder.id}`, { hidden });
    await loadConversations();
    if (state.current) await chat.refreshCurrent();
    setStatus(hidden ? "Folder hidden: its conversations stay readable but leave automatic continuity."
      : "Folder shown again.");
  } catch (error) {
    setStatus(error.message, "error");
  }
}

export async function restoreConversation(id) {
  try {
    const restored = await apiJson("POST", `/api/conversations/${id}/restore`, { shielded: true });
    await loadConversations();
    if (state.current && state.current.id === id) await chat.refreshCurrent();
    setStatus(`Restored “${conversationTitle(restored)}”. It stays shielded from automatic continuity until you release it.`);
  } catch (error) {
    setStatus(error.message, "error");
  }
}

ui.newForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = { title: ui.newTitle.value, continue: ui.newContinue.checked };
  if (ui.personaSelect.options.length > 1) body.persona_id = Number(ui.personaSelect.value);
  else if (state.current) body.persona_id = state.current.persona_id;
  const submit = ui.newForm.querySelector("button[type=submit]");
  submit.disabled = true;
  try {
    const result = await apiJson("POST", "/api/conversations/new-chat", body);
    ui.newTitle.value = "";
    await loadConversations();
    await chat.selectConversation(result.conversation.id);
    closePanels();
    if (result.source_conversation_id) {
      const source = state.conversations.find((c) => c.id === result.source_conversation_id)
        || await apiJson("GET", `/api/conversations/${result.source_conversation_id}`).catch(() => null);
      setStatus(`Continuing from “${source ? conversationTitle(source) : "the last conversation"}”.`);
    }
  } catch (error) {
    setStatus(error.message, "error");
  } finally {
    submit.disabled = false;
  }
});

ui.newFolder.addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    const folder = await apiJson("POST", "/api/folders", { name: ui.newFolderName.value });
    ui.newFolderName.value = "";
    await loadConversations();
    setStatus(`Folder “${folder.name}” created.`);
  } catch (error) {
    setStatus(error.message, "error");
  }
});

$("forget-period-form").append(periodForm(loadConversations, setStatus));
ui.trash.addEventListener("toggle", () => {
  if (!ui.trash.open) return;
  loadList("trash", { trashed: "true" }).then(() => {
    remember();
    renderList();
  }).catch((error) => setStatus(error.message, "error"));
});

ui.more.addEventListener("click", () => loadMore("main").catch((error) => setStatus(error.message, "error")));
ui.pinnedMore.addEventListener("click", () => loadMore("pinned").catch((error) => setStatus(error.message, "error")));
ui.trashMore.addEventListener("click", () => loadMore("trash").catch((error) => setStatus(error.message, "error")));

// The filter reloads the main list a moment after typing stops.
let filterTimer = 0;
const refilter = () => {
  clearTimeout(filterTimer);
  // Back from a search, the Pinned group is read again (pins may have changed meanwhile).
  filterTimer = setTimeout(() => Promise.all([loadList("main", mainParams()),
    filtering() ? null : loadList("pinned", { pinned: "true" })]).then(() => {
    remember();
    renderList();
  }).catch((error) => setStatus(error.message, "error")), 200);
};
ui.filter.addEventListener("submit", (event) => {
  event.preventDefault();
  refilter();
});
ui.filterText.addEventListener("input", refilter);
ui.filterPersona.addEventListener("change", refilter);
ui.personaSelect.addEventListener("change", showPicked);
ui.filterFolder.addEventListener("change", refilter);
