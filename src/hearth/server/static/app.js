// Hearth web UI: conversation list, chat with streamed replies, visible estimate, request size.
// User text is only ever placed with textContent, never parsed as HTML.

const csrfToken = document.querySelector('meta[name="csrf-token"]').content;

const $ = (id) => document.getElementById(id);
const ui = {
  list: $("conversation-list"),
  newForm: $("new-conversation"),
  newTitle: $("new-title"),
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
  end: $("end-conversation"),
  trash: $("trash-conversation"),
  sizePanel: $("size-panel"),
  sizeEmpty: $("size-empty"),
  logout: $("logout"),
};

const state = { conversations: [], personas: [], current: null, sending: false };

class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const headers = { "X-CSRF-Token": csrfToken, Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (_) {
    throw new ApiError(0, "network", "The server could not be reached.");
  }
  if (response.status === 401) {
    window.location.assign("/login");
  }
  if (!response.ok) {
    let code = "error";
    let detail = `Request failed (${response.status})`;
    try {
      const data = await response.json();
      code = data.error || code;
      detail = data.detail || detail;
    } catch (_) {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, code, detail);
  }
  return response;
}

async function apiJson(method, path, body) {
  const response = await api(method, path, body);
  return response.status === 204 ? null : response.json();
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function setStatus(text, kind = "info") {
  ui.status.textContent = text;
  ui.status.dataset.kind = kind;
}

function formatNumber(n) {
  return typeof n === "number" ? n.toLocaleString() : String(n);
}

// -- conversation list --------------------------------------------------------------------------
function conversationTitle(c) {
  return c.title || "Untitled conversation";
}

function renderList() {
  ui.list.replaceChildren();
  if (!state.conversations.length) {
    ui.list.append(el("li", "muted empty", "No conversations yet."));
    return;
  }
  for (const c of state.conversations) {
    const item = el("li");
    const button = el("button", "conversation");
    button.type = "button";
    button.dataset.id = String(c.id);
    if (state.current && state.current.id === c.id) button.setAttribute("aria-current", "true");
    button.append(el("span", "conversation-title", conversationTitle(c)));
    const when = new Date(c.updated_at).toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
    button.append(el("span", "conversation-meta", c.state === "ended" ? `Ended · ${when}` : when));
    button.addEventListener("click", () => selectConversation(c.id));
    item.append(button);
    ui.list.append(item);
  }
}

async function loadConversations() {
  state.conversations = await apiJson("GET", "/api/conversations");
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

// -- chat view ------------------------------------------------------------------------------------
function addMessage(role, content, personaId) {
  const item = el("li", `message role-${role}`);
  item.append(el("div", "who", role === "user" ? "You" : personaName(personaId)));
  item.append(el("div", "body", content));
  ui.messages.append(item);
  item.scrollIntoView({ block: "end" });
  return item;
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

function renderHeader() {
  const c = state.current;
  ui.title.textContent = c ? conversationTitle(c) : "Choose or start a conversation";
  const parts = [];
  if (c) {
    parts.push(personaName(c.persona_id));
    if (c.state === "ended") parts.push("Ended");
    if (c.continuity_shielded) parts.push("Shielded");
    if (c.visibility === "hidden") parts.push("In a hidden folder");
  }
  ui.meta.textContent = parts.join(" · ");
  const open = Boolean(c) && c.state !== "ended" && c.visibility !== "trashed";
  ui.text.disabled = !open || state.sending;
  ui.send.disabled = !open || state.sending;
  ui.end.disabled = !open || state.sending;
  ui.trash.disabled = !c || state.sending;
  if (c && c.state === "ended") ui.text.placeholder = "This conversation has ended. Start a new one to continue.";
  else ui.text.placeholder = "Write a message…  (Enter sends, Shift+Enter adds a line)";
}

async function selectConversation(id) {
  setStatus("");
  const [conversation, messages, size] = await Promise.all([
    apiJson("GET", `/api/conversations/${id}`),
    apiJson("GET", `/api/conversations/${id}/messages`),
    apiJson("GET", `/api/conversations/${id}/request-size`),
  ]);
  state.current = conversation;
  ui.messages.replaceChildren();
  for (const m of messages.messages) addMessage(m.role, m.content, conversation.persona_id);
  renderEstimate(messages.estimate);
  renderSize(size.size);
  renderHeader();
  renderList();
  history.replaceState(null, "", `#conversation-${id}`);
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
  const reply = addMessage("assistant", "", conversation.persona_id);
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
    const retry = el("button", "quiet", "Try again");
    retry.type = "button";
    retry.addEventListener("click", () => {
      reply.remove();
      runSend(() => streamReply(`/api/conversations/${state.current.id}/retry`, {}, null));
    });
    reply.append(retry);
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
  const userBubble = addMessage("user", text);
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
  const body = { title: ui.newTitle.value };
  if (state.personas.length > 1) body.persona_id = Number(ui.personaSelect.value);
  try {
    const conversation = await apiJson("POST", "/api/conversations", body);
    ui.newTitle.value = "";
    await loadConversations();
    await selectConversation(conversation.id);
  } catch (error) {
    setStatus(error.message, "error");
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

ui.trash.addEventListener("click", async () => {
  try {
    await apiJson("POST", `/api/conversations/${state.current.id}/trash`);
    state.current = null;
    ui.messages.replaceChildren();
    renderEstimate(null);
    renderSize(null);
    renderHeader();
    await loadConversations();
    setStatus("Moved to the trash.");
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

async function start() {
  try {
    await loadPersonas();
    await loadConversations();
    const match = /^#conversation-(\d+)$/.exec(window.location.hash);
    const wanted = match && state.conversations.find((c) => c.id === Number(match[1]));
    const first = wanted || state.conversations[0];
    if (first) await selectConversation(first.id);
    else renderHeader();
  } catch (error) {
    setStatus(error.message, "error");
  }
  document.body.dataset.ready = "true";
}

start();
