// The open conversation: opening one (messages, estimate, request size, snapshot), its header and the
// conversation actions (move to a folder, shield, end, trash, restore).

import { $, apiJson, el, focusAfter } from "./api.js";
import { conversationTitle, personaName, setStatus, shared } from "./shared.js";
import { PAGE, clearMessages, revealMessage, showMessages } from "./messages.js";
import { clearSnapshotStatus, renderEstimate, renderSize, renderSnapshot, setRefreshEnabled } from "./sidepanel.js";
import { connectChat, followPersona, loadConversations, markCurrent, renderList, restoreConversation } from "./threads.js";
import { restoreDraft } from "./drafts.js";
import { renderOrganise } from "./organise.js";
import { renderModelPicker } from "./modelpick.js";
import { renderPresets } from "./presets.js";
import { showVoiceChoice } from "./speech.js";
import { refreshNotice } from "./notice.js";
import { avatarFor } from "./avatars.js";

const ui = {
  title: $("chat-title"),
  meta: $("chat-meta"),
  companion: $("chat-companion"),
  text: $("composer-text"),
  send: $("send"),
  branch: $("branch-conversation"),
  branchReason: $("branch-reason"),
  messages: $("messages"),
  moveFolder: $("move-folder"),
  shield: $("shield-toggle"),
  restore: $("restore-conversation"),
  end: $("end-conversation"),
  trashButton: $("trash-conversation"),
  rename: $("rename-conversation"),
  renameForm: $("rename-form"),
  renameTitle: $("rename-title"),
  renameCancel: $("rename-cancel"),
};

const state = shared;
const NARROW = window.matchMedia("(max-width: 900px)");

function renderFolderSelect() {
  const c = state.current;
  ui.moveFolder.replaceChildren();
  const none = el("option", "", "No folder");
  none.value = "";
  ui.moveFolder.append(none);
  for (const folder of state.folders) {
    const option = el("option", "", folder.hidden ? `${folder.name} (hidden)` : folder.name);
    option.value = String(folder.id);
    ui.moveFolder.append(option);
  }
  ui.moveFolder.value = c && c.folder_id ? String(c.folder_id) : "";
  ui.moveFolder.setAttribute("aria-label", "Move to folder");
}

export function renderHeader() {
  const c = state.current;
  ui.title.textContent = c ? conversationTitle(c) : "Choose or start a conversation";
  const parts = [];
  if (c) {
    parts.push(personaName(c.persona_id));
    if (c.state === "ended") parts.push("Ended");
    if (c.continuity_shielded) parts.push("Shielded from automatic continuity");
    if (c.visibility === "hidden") parts.push("In a hidden folder");
    if (c.visibility === "trashed") parts.push("In the trash");
    if (c.imported) parts.push("Imported");
  }
  ui.meta.textContent = parts.join(" · ");
  // The companion's face beside the title (its name is the first word of the line under it).
  const face = c ? `${c.persona_id}:${shared.personas.find((p) => p.id === c.persona_id)?.avatar_version ?? ""}` : "";
  if (ui.companion.dataset.face !== face) {
    ui.companion.dataset.face = face;
    ui.companion.replaceChildren(...(c ? [avatarFor(c.persona_id)] : []));
  }
  showVoiceChoice(c ? c.persona_id : null); // Read aloud's voice follows the thread's persona
  const busy = state.sending;
  const trashed = Boolean(c) && c.visibility === "trashed";
  const open = Boolean(c) && c.state !== "ended" && !trashed && !c.imported; // an import is read only
  // The message box stays usable while a reply arrives (the next message can be written); Send waits.
  ui.text.disabled = !open;
  ui.send.disabled = !open || busy;
  ui.end.disabled = !open || busy;
  ui.trashButton.hidden = trashed;
  ui.trashButton.disabled = !c || busy;
  ui.restore.hidden = !trashed;
  // Branch needs a turn to carry: on an empty thread it is off, and says why.
  const empty = Boolean(c) && !ui.messages.querySelector('.message[data-kind="chat"]');
  ui.branch.disabled = !c || busy || state.branching || empty;
  ui.branchReason.hidden = !empty;
  ui.moveFolder.disabled = !c || busy || trashed;
  ui.rename.disabled = !c;
  setRefreshEnabled(Boolean(c) && !busy);
  ui.shield.hidden = !c;
  ui.shield.disabled = !c || busy;
  ui.shield.textContent = c && c.continuity_shielded ? "Release shield" : "Shield";
  ui.shield.title = c && c.continuity_shielded
    ? "Let this conversation feed automatic continuity and recall again"
    : "Keep this conversation out of automatic continuity and recall";
  renderOrganise();
  renderModelPicker();
  renderPresets();
  if (c && c.state === "ended") ui.text.placeholder = "This conversation has ended. Start a new one to continue.";
  else if (trashed) ui.text.placeholder = "This conversation is in the trash. Restore it to continue.";
  // A phone's box is narrow: the keyboard hint would be cut off there.
  else ui.text.placeholder = NARROW.matches ? "Write a message…" : "Write a message…  (Enter sends, Shift+Enter adds a line)";
  renderFolderSelect();
}

export function clearChat() {
  state.current = null;
  state.shown = null;
  sessionStorage.removeItem("hearth.open");
  clearMessages();
  renderEstimate(null);
  renderSize(null);
  renderSnapshot(null);
  renderHeader();
  renderList();
  refreshNotice(null);
}

// What opening a thread reads; started early for the thread named in the address (see app.js), so
// these requests travel with the thread list's instead of after them. The thread is drawn as soon as
// its messages arrive; the figures of the Details panel (closed by default) follow when they do.
let prefetched = null;

function fetchConversation(id) {
  const reading = {
    thread: Promise.all([
      apiJson("GET", `/api/conversations/${id}`),
      apiJson("GET", `/api/conversations/${id}/messages?newest=${PAGE}`),
    ]),
    details: Promise.all([
      apiJson("GET", `/api/conversations/${id}/request-size`),
      apiJson("GET", `/api/conversations/${id}/snapshot`),
    ]),
  };
  reading.details.catch(() => {}); // reported when the thread is drawn, or not at all if never opened
  return reading;
}

export function prefetchConversation(id) {
  const reading = fetchConversation(id);
  reading.thread.catch(() => {}); // a failure is reported when the thread is opened
  prefetched = { id, reading };
}

export async function selectConversation(id) {
  const from = document.activeElement;
  setStatus("");
  clearSnapshotStatus();
  const early = prefetched && prefetched.id === id ? prefetched.reading : null;
  prefetched = null;
  const reading = early || fetchConversation(id);
  const [conversation, messages] = await reading.thread;
  state.current = conversation;
  state.shown = id;
  showMessages(messages.messages, conversation.persona_id, messages.estimate.messages, id);
  renderEstimate(messages.estimate);
  reading.details.then(([size, snapshot]) => {
    if (state.shown !== id) return; // another thread was opened meanwhile
    renderSize(size.size);
    renderSnapshot(snapshot);
  }, (error) => setStatus(error.message, "error"));
  renderHeader();
  markCurrent(id);
  history.replaceState(null, "", `#conversation-${id}`);
  sessionStorage.setItem("hearth.open", String(id)); // other panels (Layers) keep it over a reload
  followPersona(conversation.persona_id);
  restoreDraft(id);
  // Opening a thread may queue a live-context refresh when its state is stale (LC1).
  apiJson("GET", `/api/conversations/${id}/live-context?opened=true`).catch(() => {});
  refreshNotice(id); // suggestions from this thread waiting for the person (notice.js, W11)
  if (!ui.text.disabled) focusAfter(ui.text, from);
}

// Shows the open thread's newest page again (its path changed: another version of a message of the
// person's was chosen) and returns the bubble of message `focusId`, if it is shown.
export async function reloadMessages(focusId) {
  const id = state.current.id;
  const [messages, size] = await Promise.all([
    apiJson("GET", `/api/conversations/${id}/messages?newest=${PAGE}`),
    apiJson("GET", `/api/conversations/${id}/request-size`),
  ]);
  if (!state.current || state.current.id !== id) return null;
  showMessages(messages.messages, state.current.persona_id, messages.estimate.messages, id);
  renderEstimate(messages.estimate);
  renderSize(size.size);
  renderHeader();
  return revealMessage(focusId);
}

export async function refreshCurrent() {
  const id = state.current.id;
  const [conversation, estimate] = await Promise.all([
    apiJson("GET", `/api/conversations/${id}`),
    apiJson("GET", `/api/conversations/${id}/estimate`),
  ]);
  // Another action may have closed or switched the thread meanwhile: its state wins.
  if (state.current && state.current.id === id) {
    state.current = conversation;
    renderEstimate(estimate);
    renderHeader();
    refreshNotice(id); // a reply has ended: what it suggested, and what it remembered (W11)
  }
  await loadConversations();
}

connectChat({ selectConversation, refreshCurrent, afterListRender: renderFolderSelect });

// -- conversation actions -------------------------------------------------------------------------
ui.moveFolder.addEventListener("change", async () => {
  if (!state.current) return;
  const folderId = ui.moveFolder.value ? Number(ui.moveFolder.value) : null;
  try {
    await apiJson("POST", `/api/conversations/${state.current.id}/move`, { folder_id: folderId });
    await refreshCurrent();
    const folder = state.folders.find((f) => f.id === folderId);
    setStatus(folder ? `Moved to “${folder.name}”.` : "Moved out of its folder.");
  } catch (error) {
    setStatus(error.message, "error");
    renderFolderSelect();
  }
});

ui.shield.addEventListener("click", async () => {
  const c = state.current;
  if (!c) return;
  const release = c.continuity_shielded;
  ui.shield.disabled = true;
  try {
    await apiJson("POST", release ? `/api/conversations/${c.id}/shield/release` : `/api/conversations/${c.id}/shield`,
      release ? undefined : { shielded: true });
    await refreshCurrent();
    setStatus(release ? "Shield released: this conversation can feed continuity and recall again."
      : "Shielded: kept out of automatic continuity and recall until you release it.");
  } catch (error) {
    setStatus(error.message, "error");
    renderHeader();
  }
});

ui.restore.addEventListener("click", () => state.current && restoreConversation(state.current.id));

ui.end.addEventListener("click", async () => {
  try {
    await apiJson("POST", `/api/conversations/${state.current.id}/end`);
    await refreshCurrent();
    setStatus("Conversation ended. Its history stays here.");
  } catch (error) {
    setStatus(error.message, "error");
  }
});

ui.trashButton.addEventListener("click", async () => {
  try {
    await apiJson("POST", `/api/conversations/${state.current.id}/trash`);
    clearChat();
    history.replaceState(null, "", "#chat");
    await loadConversations();
    setStatus("Moved to the trash. Restore it from the Trash list.");
  } catch (error) {
    setStatus(error.message, "error");
  }
});

// Rename (W4): the title turns into a field; Enter saves, Escape cancels.
function closeRename() {
  ui.renameForm.hidden = true;
  ui.title.hidden = false;
}

ui.rename.addEventListener("click", () => {
  if (!state.current) return;
  ui.renameTitle.value = state.current.title;
  ui.title.hidden = true;
  ui.renameForm.hidden = false;
  ui.renameTitle.select();
});

ui.renameCancel.addEventListener("click", () => {
  closeRename();
  ui.rename.focus();
});

ui.renameTitle.addEventListener("keydown", (event) => {
  if (event.key === "Escape") ui.renameCancel.click();
});

ui.renameForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const from = document.activeElement;
  try {
    await apiJson("POST", `/api/conversations/${state.current.id}/rename`, { title: ui.renameTitle.value });
    closeRename();
    await refreshCurrent();
    setStatus("Conversation renamed.");
    focusAfter(ui.rename, from);
  } catch (error) {
    setStatus(error.message, "error");
  }
});
