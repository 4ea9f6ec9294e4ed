// Hearth web UI: navigation between panels, the thread list (folders, trash, shield), the chat with
// streamed replies, Branch / Fresh Chat, the memory snapshot and request-size details.
// User text is only ever placed with textContent, never parsed as HTML.

import { $, api, apiJson, button, el, formatDate, formatNumber, say } from "./api.js";
import { shared } from "./shared.js";
import { showMemory } from "./memory.js";
import { showLayers } from "./layers.js";
import { showRecall } from "./recall.js";
import { showTimeline } from "./timeline.js";
import { showTools } from "./tools.js";

const ui = {
  list: $("conversation-list"),
  folderGroups: $("folder-groups"),
  newFolder: $("new-folder"),
  newFolderName: $("new-folder-name"),
  trash: $("trash"),
  trashList: $("trash-list"),
  trashCount: $("trash-count"),
  newForm: $("new-conversation"),
  newTitle: $("new-title"),
  newContinue: $("new-continue"),
  personaField: $("persona-field"),
  personaSelect: $("persona-select"),
  title: $("chat-title"),
  meta: $("chat-meta"),
  estimate: $("estimate-text"),
  messages: $("messages"),
  status: $("status"),
  composer: $("composer"),
  text: $("composer-text"),
  send: $("send"),
  branch: $("branch-conversation"),
  moveFolder: $("move-folder"),
  shield: $("shield-toggle"),
  restore: $("restore-conversation"),
  end: $("end-conversation"),
  trashButton: $("trash-conversation"),
  snapshotInfo: $("snapshot-info"),
  refreshMemory: $("refresh-memory"),
  snapshotStatus: $("snapshot-status"),
  sizePanel: $("size-panel"),
  sizeEmpty: $("size-empty"),
  logout: $("logout"),
};

const state = shared; // conversations, folders, personas, current: shared with the other panels
state.sending = false;
state.branching = false;
const collapsed = new Set(JSON.parse(sessionStorage.getItem("hearth.collapsed") || "[]"));

function setStatus(text, kind = "info") {
  say(ui.status, text, kind);
}

// -- navigation ---------------------------------------------------------------------------------
const VIEWS = {
  chat: null, memory: showMemory, layers: showLayers, recall: showRecall, timeline: showTimeline, tools: showTools,
};
let currentView = "";

function viewFromHash() {
  const hash = window.location.hash.slice(1);
  if (/^conversation-\d+$/.test(hash)) return { view: "chat", conversation: Number(hash.split("-")[1]) };
  return { view: hash in VIEWS ? hash : "chat", conversation: null };
}

async function route() {
  const { view, conversation } = viewFromHash();
  const changed = view !== currentView;
  currentView = view;
  for (const node of document.querySelectorAll(".view")) node.hidden = node.dataset.view !== view;
  for (const link of document.querySelectorAll(".main-nav a")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  try {
    if (view === "chat") {
      if (conversation && (!state.current || state.current.id !== conversation)) {
        await selectConversation(conversation);
      } else if (state.current) {
        history.replaceState(null, "", `#conversation-${state.current.id}`);
      }
    } else {
      if (changed) document.querySelector(`#view-${view} h1`).focus();
      await VIEWS[view]();
    }
  } catch (error) {
    setStatus(error.message, "error");
  }
}

// -- thread list ----------------------------------------------------------------------------------
function conversationTitle(c) {
  return c.title || "Untitled conversation";
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

function renderList() {
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
    ui.trashList.append(item);
  }
  renderFolderSelect();
}

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

async function loadConversations() {
  const [conversations, folders] = await Promise.all([
    apiJson("GET", "/api/conversations?include_trashed=true"),
    apiJson("GET", "/api/folders"),
  ]);
  state.conversations = conversations;
  state.folders = folders;
  renderList();
}

async function loadPersonas() {
  state.personas = await apiJson("GET", "/api/personas");
  ui.personaSelect.replaceChildren();
  for (const p of state.personas) {
    const option = el("option", "", p.display_name);
    option.value = String(p.id);
    ui.personaSelect.append(option);
  }
  ui.personaField.hidden = state.personas.length < 2;
}

function personaName(id) {
  const persona = state.personas.find((p) => p.id === id);
  return persona ? persona.display_name : "Companion";
}

async function setFolderHidden(folder, hidden) {
  try {
    await apiJson("PATCH", `/api/folders/${folder.id}`, { hidden });
    await loadConversations();
    if (state.current) await refreshCurrent();
    setStatus(hidden ? "Folder hidden: its conversations stay readable but leave automatic continuity."
      : "Folder shown again.");
  } catch (error) {
    setStatus(error.message, "error");
  }
}

async function restoreConversation(id) {
  try {
    const restored = await apiJson("POST", `/api/conversations/${id}/restore`, { shielded: true });
    await loadConversations();
    if (state.current && state.current.id === id) await refreshCurrent();
    setStatus(`Restored “${conversationTitle(restored)}”. It stays shielded from automatic continuity until you release it.`);
  } catch (error) {
    setStatus(error.message, "error");
  }
}

// -- chat view ------------------------------------------------------------------------------------
function addMessage(message, personaId) {
  const role = message.role;
  const item = el("li", `message role-${role}`);
  item.dataset.messageId = message.id ? String(message.id) : "";
  if (message.kind === "handoff_artifact") {
    item.classList.add("handoff");
    item.append(el("div", "who", "Handoff from an earlier conversation"));
    item.append(handoffBody(message.content));
    const source = (message.metadata || {}).source_conversation_id;
    if (source) {
      const link = el("a", "source-link", "Open source conversation");
      link.href = `#conversation-${source}`;
      item.append(link);
    }
  } else {
    item.append(el("div", "who", role === "user" ? "You" : personaName(personaId)));
    item.append(el("div", "body", message.content));
  }
  ui.messages.append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

// The handoff artifact is Markdown of a fixed shape: "## Branch from: <escaped title>", an italic
// intro, then turns "**<escaped label>**" + verbatim body joined by "---". It is laid out here as
// elements with textContent; the verbatim bodies are never interpreted, and anything of another
// shape is shown as plain text.
const SEPARATOR = "\n\n---\n\n";
const unescapeMarkdown = (text) => text.replace(/\\([!-/:-@[-`{-~])/g, "$1");

function handoffBody(content) {
  const body = el("div", "body handoff-body");
  const parts = content.split("\n\n");
  const heading = /^## (.*)$/.exec(parts[0] || "");
  const intro = /^_(.*)_$/s.exec(parts[1] || "");
  if (!heading || !intro) {
    body.textContent = content;
    return body;
  }
  body.append(el("p", "handoff-title", unescapeMarkdown(heading[1])));
  body.append(el("p", "handoff-intro", intro[1]));
  const rest = parts.slice(2).join("\n\n");
  const turns = [];
  for (const chunk of rest.split(SEPARATOR)) {
    const label = /^\*\*(.+?)\*\*\n\n/s.exec(chunk);
    if (label || !turns.length) turns.push({ label: label ? unescapeMarkdown(label[1]) : "", text: label ? chunk.slice(label[0].length) : chunk });
    else turns[turns.length - 1].text += SEPARATOR + chunk; // a body that itself held a separator
  }
  for (const turn of turns) {
    const block = el("div", "handoff-turn");
    if (turn.label) block.append(el("p", "handoff-label", turn.label));
    block.append(el("p", "handoff-text", turn.text));
    body.append(block);
  }
  return body;
}

function renderEstimate(estimate) {
  if (!estimate) {
    ui.estimate.textContent = "–";
    return;
  }
  const noun = estimate.messages === 1 ? "message" : "messages";
  ui.estimate.textContent = `${formatNumber(estimate.messages)} ${noun} · ~${formatNumber(estimate.tokens)} tokens`;
}

const SIZE_ROWS = [
  ["total_tokens", "Total"],
  ["input_limit_tokens", "Input limit"],
  ["remaining_tokens", "Remaining"],
  ["static_prompt_tokens", "Static prompt"],
  ["history_tokens", "History"],
  ["history_messages", "History messages"],
  ["history_trimmed_messages", "Trimmed messages"],
  ["dynamic_context_tokens", "Dynamic context"],
  ["handoff_tokens", "Handoff"],
  ["summary_tokens", "Summary"],
  ["user_message_tokens", "Your message"],
  ["tools_tokens", "Tools"],
  ["tools_count", "Tool definitions"],
];

function renderSize(size) {
  ui.sizePanel.replaceChildren();
  if (!size) {
    ui.sizePanel.hidden = true;
    ui.sizeEmpty.hidden = false;
    return;
  }
  ui.sizeEmpty.hidden = true;
  ui.sizePanel.hidden = false;
  if (size.input_limit_tokens) {
    const meter = el("meter", "size-meter");
    meter.min = 0;
    meter.max = size.input_limit_tokens;
    meter.value = size.total_tokens || 0;
    meter.high = size.input_limit_tokens * 0.85;
    meter.setAttribute("aria-label", "Share of the input limit used");
    const wrap = el("div", "size-meter-row");
    wrap.append(meter);
    ui.sizePanel.append(wrap);
  }
  for (const [key, label] of SIZE_ROWS) {
    if (!(key in size)) continue;
    const row = el("div", "size-row");
    row.dataset.key = key;
    row.append(el("dt", "", label), el("dd", "", formatNumber(size[key])));
    ui.sizePanel.append(row);
  }
  const blocks = size.dynamic_blocks || {};
  for (const [name, tokens] of Object.entries(blocks)) {
    const row = el("div", "size-row sub");
    row.append(el("dt", "", `· ${name}`), el("dd", "", formatNumber(tokens)));
    ui.sizePanel.append(row);
  }
  if (size.estimate_method) {
    const row = el("div", "size-row note");
    row.append(el("dt", "", "Estimated by"), el("dd", "", size.estimate_method));
    ui.sizePanel.append(row);
  }
}

function renderSnapshot(snapshot) {
  if (!snapshot) {
    ui.snapshotInfo.textContent = "Open a conversation to see its memory snapshot.";
    return;
  }
  const info = snapshot.info;
  const count = snapshot.memories.length;
  const parts = [`${count} ${count === 1 ? "memory" : "memories"} in this thread`];
  if (info.refreshed_at) parts.push(`refreshed ${formatDate(info.refreshed_at)}`);
  else if (info.captured_at) parts.push(`captured ${formatDate(info.captured_at)}`);
  ui.snapshotInfo.textContent = parts.join(" · ");
}

function renderHeader() {
  const c = state.current;
  ui.title.textContent = c ? conversationTitle(c) : "Choose or start a conversation";
  const parts = [];
  if (c) {
    parts.push(personaName(c.persona_id));
    if (c.state === "ended") parts.push("Ended");
    if (c.continuity_shielded) parts.push("Shielded from automatic continuity");
    if (c.visibility === "hidden") parts.push("In a hidden folder");
    if (c.visibility === "trashed") parts.push("In the trash");
  }
  ui.meta.textContent = parts.join(" · ");
  const busy = state.sending;
  const trashed = Boolean(c) && c.visibility === "trashed";
  const open = Boolean(c) && c.state !== "ended" && !trashed;
  ui.text.disabled = !open || busy;
  ui.send.disabled = !open || busy;
  ui.end.disabled = !open || busy;
  ui.trashButton.hidden = trashed;
  ui.trashButton.disabled = !c || busy;
  ui.restore.hidden = !trashed;
  ui.branch.disabled = !c || busy || state.branching;
  ui.moveFolder.disabled = !c || busy || trashed;
  ui.refreshMemory.disabled = !c || busy;
  ui.shield.hidden = !c;
  ui.shield.disabled = !c || busy;
  ui.shield.textContent = c && c.continuity_shielded ? "Release shield" : "Shield";
  ui.shield.title = c && c.continuity_shielded
    ? "Let this conversation feed automatic continuity and recall again"
    : "Keep this conversation out of automatic continuity and recall";
  if (c && c.state === "ended") ui.text.placeholder = "This conversation has ended. Start a new one to continue.";
  else if (trashed) ui.text.placeholder = "This conversation is in the trash. Restore it to continue.";
  else ui.text.placeholder = "Write a message…  (Enter sends, Shift+Enter adds a line)";
  renderFolderSelect();
}

function clearChat() {
  state.current = null;
  ui.messages.replaceChildren();
  renderEstimate(null);
  renderSize(null);
  renderSnapshot(null);
  renderHeader();
  renderList();
}

// Opens a conversation in the chat view (switching views through the hash).
function openConversation(id) {
  if (window.location.hash === `#conversation-${id}` && currentView === "chat") return;
  window.location.hash = `conversation-${id}`;
}

async function selectConversation(id) {
  setStatus("");
  say(ui.snapshotStatus, "");
  const [conversation, messages, size, snapshot] = await Promise.all([
    apiJson("GET", `/api/conversations/${id}`),
    apiJson("GET", `/api/conversations/${id}/messages`),
    apiJson("GET", `/api/conversations/${id}/request-size`),
    apiJson("GET", `/api/conversations/${id}/snapshot`),
  ]);
  state.current = conversation;
  ui.messages.replaceChildren();
  for (const m of messages.messages) addMessage(m, conversation.persona_id);
  // A fresh branch starts at its handoff: show it from the top.
  if (messages.messages.length && messages.messages.every((m) => m.kind === "handoff_artifact")) ui.messages.scrollTop = 0;
  renderEstimate(messages.estimate);
  renderSize(size.size);
  renderSnapshot(snapshot);
  renderHeader();
  renderList();
  history.replaceState(null, "", `#conversation-${id}`);
  // Opening a thread may queue a live-context refresh when its state is stale (LC1).
  apiJson("GET", `/api/conversations/${id}/live-context?opened=true`).catch(() => {});
  if (!ui.text.disabled) ui.text.focus();
}

async function refreshCurrent() {
  const id = state.current.id;
  const [conversation, estimate] = await Promise.all([
    apiJson("GET", `/api/conversations/${id}`),
    apiJson("GET", `/api/conversations/${id}/estimate`),
  ]);
  state.current = conversation;
  renderEstimate(estimate);
  renderHeader();
  await loadConversations();
}

// -- streaming ------------------------------------------------------------------------------------
// Reads server-sent events from a fetch response and calls onEvent(type, data) for each frame.
async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent(type, JSON.parse(data.join("\n")));
    }
  }
}

async function streamReply(path, body, userBubble) {
  const conversation = state.current;
  const reply = addMessage({ role: "assistant", kind: "chat", content: "" }, conversation.persona_id);
  reply.classList.add("streaming");
  reply.setAttribute("aria-busy", "true");
  const replyBody = reply.querySelector(".body");
  let response;
  try {
    response = await api("POST", path, body);
  } catch (error) {
    reply.remove();
    throw error;
  }
  let failed = false;
  await readEvents(response, (type, data) => {
    if (type === "saved" && userBubble) {
      userBubble.classList.remove("pending");
    } else if (type === "diagnostics") {
      renderSize(data);
    } else if (type === "delta") {
      replyBody.textContent += data.text;
      reply.scrollIntoView({ block: "end" });
    } else if (type === "tool") {
      setStatus(data.status === "running" ? `Using ${data.name}…` : `${data.name} finished.`);
    } else if (type === "done") {
      setStatus("");
    } else if (type === "error") {
      failed = true;
      showReplyError(reply, data);
    }
  });
  reply.classList.remove("streaming");
  reply.removeAttribute("aria-busy");
  if (!failed && !replyBody.textContent) replyBody.textContent = "(empty reply)";
}

function showReplyError(reply, data) {
  reply.classList.add("failed");
  reply.querySelector(".body").textContent = "";
  const note = el("p", "error", `The reply failed: ${data.detail}`);
  note.setAttribute("role", "alert");
  reply.append(note);
  if (data.retryable !== false) {
    reply.append(button("Try again", () => {
      reply.remove();
      runSend(() => streamReply(`/api/conversations/${state.current.id}/retry`, {}, null));
    }));
  }
}

async function runSend(work) {
  state.sending = true;
  renderHeader();
  try {
    await work();
  } catch (error) {
    setStatus(error.message, "error");
  } finally {
    state.sending = false;
    renderHeader();
    if (state.current) {
      try {
        await refreshCurrent();
      } catch (error) {
        setStatus(error.message, "error");
      }
    }
    if (!ui.text.disabled) ui.text.focus();
  }
}

async function sendMessage() {
  const text = ui.text.value;
  if (!text.trim() || !state.current || state.sending) return;
  setStatus("");
  const userBubble = addMessage({ role: "user", kind: "chat", content: text });
  userBubble.classList.add("pending");
  await runSend(async () => {
    try {
      await streamReply(`/api/conversations/${state.current.id}/messages`, { text }, userBubble);
      ui.text.value = "";
    } catch (error) {
      userBubble.remove(); // nothing was saved: keep the text in the box
      throw error;
    }
  });
}

// -- Branch / Fresh Chat --------------------------------------------------------------------------
// One retry key per source conversation, kept in sessionStorage until the branch has opened: a
// double click, a lost response or a reload mid-request all send the same key, so the server
// returns the same destination instead of making a second thread (H8).
function branchKey(sourceId) {
  const name = `hearth.branch.${sourceId}`;
  let key = sessionStorage.getItem(name);
  if (!key) {
    key = crypto.randomUUID();
    sessionStorage.setItem(name, key);
  }
  return { name, key };
}

async function branchFromCurrent() {
  if (!state.current || state.branching) return;
  const source = state.current;
  state.branching = true;
  renderHeader();
  setStatus("Starting a fresh chat from this conversation…");
  const { name, key } = branchKey(source.id);
  try {
    const result = await apiJson("POST", `/api/conversations/${source.id}/branch`, { retry_key: key });
    sessionStorage.removeItem(name);
    await loadConversations();
    await selectConversation(result.conversation.id);
    setStatus(`Branched from “${conversationTitle(source)}”. The handoff is the first message.`);
  } catch (error) {
    if (error.status && error.status < 500) sessionStorage.removeItem(name); // refused: a new try gets a new key
    setStatus(error.message, "error");
  } finally {
    state.branching = false;
    renderHeader();
  }
}

// -- wiring ---------------------------------------------------------------------------------------
ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  sendMessage();
});

ui.text.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    sendMessage();
  }
});

ui.newForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = { title: ui.newTitle.value, continue: ui.newContinue.checked };
  if (state.personas.length > 1) body.persona_id = Number(ui.personaSelect.value);
  const submit = ui.newForm.querySelector("button[type=submit]");
  submit.disabled = true;
  try {
    const result = await apiJson("POST", "/api/conversations/new-chat", body);
    ui.newTitle.value = "";
    await loadConversations();
    await selectConversation(result.conversation.id);
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

ui.branch.addEventListener("click", branchFromCurrent);

ui.refreshMemory.addEventListener("click", async () => {
  const c = state.current;
  if (!c) return;
  ui.refreshMemory.disabled = true;
  say(ui.snapshotStatus, "Refreshing…");
  try {
    await apiJson("POST", `/api/conversations/${c.id}/snapshot/refresh`);
    renderSnapshot(await apiJson("GET", `/api/conversations/${c.id}/snapshot`));
    say(ui.snapshotStatus, "Memory refreshed: this thread now uses the current memories.", "success");
  } catch (error) {
    say(ui.snapshotStatus, `Memory was not refreshed: ${error.message}`, "error");
  } finally {
    ui.refreshMemory.disabled = !state.current;
  }
});

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

if (ui.logout) {
  ui.logout.addEventListener("click", async () => {
    try {
      await apiJson("POST", "/api/auth/logout");
    } finally {
      window.location.assign("/login");
    }
  });
}

window.addEventListener("hashchange", route);

async function start() {
  try {
    await loadPersonas();
    await loadConversations();
    const { view, conversation } = viewFromHash();
    if (view === "chat" && !conversation) {
      const first = state.conversations.find((c) => c.visibility !== "trashed");
      if (first) await selectConversation(first.id);
      else renderHeader();
    }
    await route();
  } catch (error) {
    setStatus(error.message, "error");
  }
  document.body.dataset.ready = "true";
}

start();
