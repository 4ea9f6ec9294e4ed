// The thread list (the chat's sidebar): conversations outside folders, folder groups with hide and
// show, the trash with Restore, and the New Chat and New folder forms.

import { $, apiJson, button, el, formatDate } from "./api.js";
import { forgetControl } from "./forget.js";
import { conversationTitle, openConversation, setStatus, shared } from "./shared.js";

const ui = {
  list: $("conversation-list"),
  folderGroups: $("folder-groups"),
  newFolder: $("new-folder"),
  newFolderName: $("new-folder-name"),
  trashList: $("trash-list"),
  trashCount: $("trash-count"),
  newForm: $("new-conversation"),
  newTitle: $("new-title"),
  newContinue: $("new-continue"),
  personaField: $("persona-field"),
  personaSelect: $("persona-select"),
};

const state = shared;
const collapsed = new Set(JSON.parse(sessionStorage.getItem("hearth.collapsed") || "[]"));

// What the list needs from the open conversation, given by the chat module (so the two do not import
// each other): selectConversation(id), refreshCurrent(), afterListRender().
let chat = { selectConversation: async () => {}, refreshCurrent: async () => {}, afterListRender: () => {} };

export function connectChat(handlers) {
  chat = handlers;
}

function conversationButton(c) {
  const item = el("li");
  const node = el("button", "conversation");
  node.type = "button";
  node.dataset.id = String(c.id);
  if (state.current && state.current.id === c.id) node.setAttribute("aria-current", "true");
  const top = el("span", "conversation-top");
  top.append(el("span", "conversation-title", conversationTitle(c)));
  if (c.continuity_shielded) top.append(el("span", "badge shield-badge", "Shielded"));
  node.append(top);
  const when = formatDate(c.updated_at);
  node.append(el("span", "conversation-meta", c.state === "ended" ? `Ended · ${when}` : when));
  node.addEventListener("click", () => openConversation(c.id));
  item.append(node);
  return item;
}

export function renderList() {
  const live = state.conversations.filter((c) => c.visibility !== "trashed");
  const trashed = state.conversations.filter((c) => c.visibility === "trashed");
  ui.list.replaceChildren();
  const loose = live.filter((c) => c.folder_id === null);
  if (!loose.length) ui.list.append(el("li", "muted empty", live.length ? "Every conversation is in a folder." : "No conversations yet."));
  for (const c of loose) ui.list.append(conversationButton(c));

  ui.folderGroups.replaceChildren();
  for (const folder of state.folders) {
    const members = live.filter((c) => c.folder_id === folder.id);
    const group = el("section", "folder");
    group.dataset.folderId = String(folder.id);
    const head = el("div", "folder-head");
    const open = !collapsed.has(folder.id);
    const toggle = button(`${folder.name}`, () => {
      if (collapsed.has(folder.id)) collapsed.delete(folder.id);
      else collapsed.add(folder.id);
      sessionStorage.setItem("hearth.collapsed", JSON.stringify([...collapsed]));
      renderList();
    }, "folder-toggle");
    toggle.setAttribute("aria-expanded", String(open));
    toggle.prepend(el("span", "chevron", open ? "▾" : "▸"));
    toggle.append(el("span", "count", String(members.length)));
    head.append(toggle);
    if (folder.hidden) head.append(el("span", "badge hidden-badge", "Hidden"));
    const flip = button(folder.hidden ? "Show" : "Hide", () => setFolderHidden(folder, !folder.hidden), "quiet small",
      `${folder.hidden ? "Show" : "Hide"} folder ${folder.name}`);
    head.append(flip);
    head.append(forgetControl("Delete forever", { target: "folder", id: folder.id }, `Delete folder ${folder.name} forever`,
      loadConversations, setStatus));
    group.append(head);
    if (open) {
      const list = el("ul", "conversation-list");
      if (!members.length) list.append(el("li", "muted empty", "Empty."));
      for (const c of members) list.append(conversationButton(c));
      group.append(list);
    }
    ui.folderGroups.append(group);
  }
  if (!state.folders.length) ui.folderGroups.append(el("p", "muted empty", "No folders yet."));

  ui.trashList.replaceChildren();
  ui.trashCount.textContent = trashed.length ? String(trashed.length) : "";
  if (!trashed.length) ui.trashList.append(el("li", "muted empty", "The trash is empty."));
  for (const c of trashed) {
    const item = conversationButton(c);
    item.classList.add("trashed");
    item.append(button("Restore", () => restoreConversation(c.id), "quiet small",
      `Restore ${conversationTitle(c)}`));
    item.append(forgetControl("Delete forever", { target: "conversation", id: c.id },
      `Delete ${conversationTitle(c)} forever`, loadConversations, setStatus));
    ui.trashList.append(item);
  }
  if (trashed.length) {
    const empty = el("li", "trash-empty");
    empty.append(forgetControl("Empty trash", { target: "trash" }, "Empty the trash forever", loadConversations, setStatus));
    ui.trashList.append(empty);
  }
  chat.afterListRender();
}

export async function loadConversations() {
  const [conversations, folders] = await Promise.all([
    apiJson("GET", "/api/conversations?include_trashed=true"),
    apiJson("GET", "/api/folders"),
  ]);
  state.conversations = conversations;
  state.folders = folders;
  renderList();
}

export async function loadPersonas() {
  state.personas = await apiJson("GET", "/api/personas");
  ui.personaSelect.replaceChildren();
  for (const p of state.personas) {
    const option = el("option", "", p.display_name);
    option.value = String(p.id);
    ui.personaSelect.append(option);
  }
  ui.personaField.hidden = state.personas.length < 2;
}

// New Chat starts with the open thread's persona (the picker follows the thread).
export function followPersona(personaId) {
  if (state.personas.some((p) => p.id === personaId)) ui.personaSelect.value = String(personaId);
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
  if (state.personas.length > 1) body.persona_id = Number(ui.personaSelect.value);
  else if (state.current) body.persona_id = state.current.persona_id;
  const submit = ui.newForm.querySelector("button[type=submit]");
  submit.disabled = true;
  try {
    const result = await apiJson("POST", "/api/conversations/new-chat", body);
    ui.newTitle.value = "";
    await loadConversations();
    await chat.selectConversation(result.conversation.id);
    if (result.source_conversation_id) {
      const source = state.conversations.find((c) => c.id === result.source_conversation_id);
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
