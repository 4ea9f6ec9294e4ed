// The message list of the open conversation: one bubble per message (Markdown through markdown.js),
// the handoff artifact laid out as elements with textContent, and the turn actions of W2: Regenerate
// on the last reply, Edit on every message of the person's, and swiping between versions. Every saved
// message also has Copy (its plain text), Read aloud (speech.js) and a More menu (menu.js) with Copy
// as Markdown (its source) and, last and out of the way, Delete forever.

import { $, apiJson, button, el, formatNumber } from "./api.js";
import { avatarFor } from "./avatars.js";
import { startForget } from "./forget.js";
import { menuButton } from "./menu.js";
import { icon, iconButton, setIcon } from "./icons.js";
import { readButton, speechAvailable } from "./speech.js";
import { personaName, setStatus, shared } from "./shared.js";
import { renderMarkdown } from "./markdown.js";
import { attachRemembered } from "./remembered.js";
import { showAttachments } from "./attachments.js";
import { lastSize } from "./sidepanel.js";

const list = $("messages");

// What the turn actions do, given by composer.js (so the two do not import each other).
let actions = { regenerate: () => {}, edit: () => {}, choose: () => {}, busy: () => false };

export function connectActions(handlers) {
  actions = handlers;
}

// The Markdown source of each bubble (for Edit), without doubling it in the DOM.
const sources = new WeakMap();

export function addMessage(message, personaId) {
  const item = buildMessage(message, personaId);
  list.append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

function buildMessage(message, personaId) {
  const role = message.role;
  const item = el("div", `message role-${role}`);
  setMessageData(item, message);
  if (message.kind === "handoff_artifact") {
    item.classList.add("handoff");
    item.append(el("div", "who", "Handoff from an earlier conversation"));
    item.append(handoffBody(message.content));
    sources.set(item, message.content);
    const source = (message.metadata || {}).source_conversation_id;
    const imported = (message.metadata || {}).source_document_id; // a continued import (archived.js)
    if (source || imported) {
      const link = el("a", "source-link", source ? "Open source conversation" : "Open the imported conversation");
      link.href = source ? `#conversation-${source}` : `#archived-${imported}`;
      item.append(link);
    }
  } else {
    const who = el("div", "who", role === "user" ? shared.userName || "You" : personaName(personaId));
    if (role !== "user") who.prepend(avatarFor(personaId)); // the name is beside it: decoration
    item.append(who);
    const body = el("div", "body markdown");
    renderMarkdown(body, message.content);
    item.append(body);
    sources.set(item, message.content);
    attachRemembered(item, message); // "What I remembered" (remembered.js), closed, when there is any
    showAttachments(item, message); // the message's files (attachments.js, W14)
  }
  return item;
}

// The Markdown source of a reply that has just streamed in (composer.js), for Copy as Markdown.
export function setSource(item, text) {
  sources.set(item, text);
}

// Delete forever for one message (B4), chosen in its More menu: with everything derived from it,
// after the counts and the phrase, in the bubble; Cancel gives the focus back to the menu button.
function forgetMessage(item) {
  const slot = el("span", "forget-control message-forget");
  item.append(slot);
  const restore = () => {
    slot.remove();
    item.querySelector(".menu-button")?.focus();
  };
  startForget(slot, { target: "message", id: Number(item.dataset.messageId) }, restore, () => {
    item.remove();
    refreshActions();
  }, setStatus).then(() => slot.scrollIntoView({ block: "nearest" })).catch((error) => {
    slot.remove();
    setStatus(error.message, "error");
  });
}

async function copy(text, what) {
  try {
    await navigator.clipboard.writeText(text);
    setStatus(`${what} copied.`, "success");
  } catch (error) {
    setStatus("The browser did not allow copying: select the text and copy it instead.", "error");
  }
}

const plainText = (item) => (item.querySelector(".body")?.innerText || "").trim();

// Keeps a bubble's data in step with a saved message (id, version count, chosen version).
export function setMessageData(item, message) {
  const meta = message.metadata || {};
  metas.set(item, meta);
  item.dataset.messageId = message.id ? String(message.id) : "";
  item.dataset.kind = message.kind || "chat";
  item.dataset.alternatives = String(meta.alternatives || 1);
  item.dataset.chosen = String(meta.chosen || 0);
  if (meta.greeting) item.dataset.greeting = meta.greeting; // a character's first message: swiped, not regenerated
  item.classList.toggle("partial", Boolean(meta.partial));
}

export function updateMessage(item, message) {
  setMessageData(item, message);
  sources.set(item, message.content);
  renderMarkdown(item.querySelector(".body"), message.content);
  attachRemembered(item, message); // another version: what its own send remembered (remembered.js)
}

// A long thread opens at its newest page of messages, and only the newest FIRST of them are drawn at
// once (more than a screenful; the reader sees the newest): the rest of the page is drawn a WINDOW
// at a time when the reader scrolls near the top, or when the page is idle, so opening a
// 5,000-message thread costs what opening a short one does. Earlier pages are fetched from the
// server on request ("Show earlier messages").
export const PAGE = 150;
const FIRST = 15;
const WINDOW = 30;
let earlier = { count: 0, personaId: null, conversationId: null };
let held = []; // fetched, not drawn yet; oldest first
let idle = 0;
const sentinel = el("div", "held-sentinel");
sentinel.setAttribute("aria-hidden", "true");
const nearTop = new IntersectionObserver((entries) => {
  if (entries.some((e) => e.isIntersecting)) drawHeld();
}, { root: list, rootMargin: "600px 0px 0px 0px" });
// The reader at the end of the thread stays there when the list gets shorter (the header grows as
// its details arrive, the phone keyboard opens).
// The distance to the end is measured against the height the list had when last seen here: a
// resize not handled yet (the header grew) must not count as the reader scrolling away.
let pinned = true;
let seenHeight = 0;
list.addEventListener("scroll", () => {
  pinned = list.scrollHeight - list.scrollTop - (seenHeight || list.clientHeight) < 40;
}, { passive: true });
new ResizeObserver(() => {
  seenHeight = list.clientHeight;
  if (pinned) list.scrollTop = list.scrollHeight;
}).observe(list);
const whenIdle = window.requestIdleCallback || ((fn) => setTimeout(fn, 50));
const cancelIdle = window.cancelIdleCallback || clearTimeout;

function earlierButton() {
  const more = button(`Show earlier messages (${earlier.count})`, async () => {
    const first = list.querySelector(".message[data-message-id]:not([data-message-id=''])");
    more.disabled = true;
    try {
      const page = await apiJson("GET", `/api/conversations/${earlier.conversationId}/messages?newest=${PAGE}`
        + (first ? `&before_id=${first.dataset.messageId}` : ""));
      earlier.count = page.messages.length ? Math.max(0, earlier.count - page.messages.length) : 0;
      more.remove();
      held = page.messages.concat(held);
      drawHeld();
    } catch (error) {
      more.disabled = false;
    }
  }, "quiet small earlier");
  return more;
}

// The top of the list: the sentinel while some of the page waits, else the button for the page before.
function placeTop() {
  for (const node of list.querySelectorAll(":scope > .earlier")) node.remove();
  if (held.length) {
    if (!sentinel.isConnected) list.prepend(sentinel);
    nearTop.observe(sentinel);
    fillWhenIdle();
  } else {
    nearTop.unobserve(sentinel);
    sentinel.remove();
    if (earlier.count) list.prepend(earlierButton());
  }
}

function fillWhenIdle() {
  if (idle) return;
  idle = whenIdle(() => {
    idle = 0;
    drawHeld();
  }, { timeout: 1000 });
}

// Draws the newest WINDOW of the held messages above what is shown; the reader stays where they were.
function drawHeld() {
  if (!held.length) return;
  const keep = list.scrollHeight - list.scrollTop;
  const fragment = document.createDocumentFragment();
  const nodes = held.splice(Math.max(0, held.length - WINDOW)).map((m) => buildMessage(m, earlier.personaId));
  fragment.append(...nodes);
  if (!sentinel.isConnected) list.prepend(sentinel); // a page just fetched: the marker comes back first
  sentinel.after(fragment);
  for (const node of nodes) decorate(node, false);
  placeTop();
  list.scrollTop = list.scrollHeight - keep;
}

// Draws held messages until message `id` is on the page (or nothing is held); returns its bubble.
export function revealMessage(id) {
  const find = () => list.querySelector(`.message[data-message-id="${Number(id)}"]`);
  while (!find() && held.some((m) => m.id === Number(id))) drawHeld();
  return find();
}

function stopDrawing() {
  held = [];
  if (idle) cancelIdle(idle);
  idle = 0;
  nearTop.unobserve(sentinel);
}

export function clearMessages() {
  stopDrawing();
  list.replaceChildren();
}

// messages: the newest page; total: how many visible messages the thread has.
export function showMessages(messages, personaId, total = messages.length, conversationId = null) {
  stopDrawing();
  list.replaceChildren();
  earlier = { count: Math.max(0, total - messages.length), personaId, conversationId };
  const first = Math.max(0, messages.length - FIRST);
  held = messages.slice(0, first);
  // One fragment and one layout for the newest messages, however long the thread is.
  const fragment = document.createDocumentFragment();
  for (const m of messages.slice(first)) fragment.append(buildMessage(m, personaId));
  list.append(fragment);
  placeTop();
  refreshActions();
  // A fresh branch starts at its handoff: show it from the top.
  pinned = !(messages.length && messages.every((m) => m.kind === "handoff_artifact"));
  list.scrollTop = pinned ? list.scrollHeight : 0;
}

const SAVED = '.message[data-message-id]:not([data-message-id=""])';
const chatTurns = () => [...list.querySelectorAll(`${SAVED}[data-kind="chat"]`)];

// Turn actions: Regenerate on the last reply; Edit on every message of the person's; the versions
// (‹ n / m ›) of any turn that has more than one. A message of the person's carries the turns that
// followed each of its versions, so choosing one of its versions reloads the thread. Every saved
// message (a handoff too) has Copy, Read aloud and More; while a reply streams, only Copy and Read
// aloud stay.
export function refreshActions() {
  for (const node of list.querySelectorAll(".turn-actions")) node.remove();
  const turns = chatTurns();
  const last = turns[turns.length - 1];
  for (const node of list.querySelectorAll(SAVED)) decorate(node, node === last);
}

function decorate(node, last) {
  if (!node.dataset.messageId) return;
  // The last reply keeps its actions in view; the others show them on hover or focus (app.css).
  node.classList.toggle("last-reply", last);
  if (node.dataset.kind !== "chat" || actions.busy()) node.append(messageTools(node, el("div", "turn-actions")));
  else if (node.classList.contains("role-user")) node.append(userActions(node));
  else if (last) node.append(replyActions(node, !node.dataset.greeting));
  else node.append(replyActions(node, false));
}

// Copy, Read aloud and the More menu, after the turn's own actions: Delete forever is in the menu,
// last, never a click away beside Edit.
function messageTools(node, bar) {
  const mine = node.classList.contains("role-user");
  bar.append(iconButton("copy", "Copy", () => copy(plainText(node), "The message"), "quiet small copy-message"));
  if (speechAvailable()) {
    bar.append(readButton(node, () => plainText(node), () => (mine ? null : shared.current?.persona_id)));
  }
  if (actions.busy()) return bar;
  const items = [{ label: "Copy as Markdown", action: () => copy(sources.get(node) ?? plainText(node), "The Markdown") }];
  if (node.dataset.kind === "chat") {
    items.push({ label: "Delete forever", action: () => forgetMessage(node), className: "danger",
      ariaLabel: `Delete forever: ${mine ? "your message" : "this reply"}` });
  }
  const more = menuButton("More", items, { ariaLabel: "More actions" });
  setIcon(more.querySelector(".menu-button"), "more", "More actions");
  bar.append(more);
  return bar;
}

function versions(item, label) {
  const count = Number(item.dataset.alternatives);
  const chosen = Number(item.dataset.chosen);
  const id = Number(item.dataset.messageId);
  const swipe = el("div", "swipe");
  swipe.setAttribute("role", "group");
  swipe.setAttribute("aria-label", label);
  const prev = iconButton("prev", "Previous version", () => actions.choose(item, id, chosen - 1), "quiet small icon");
  prev.disabled = chosen <= 0;
  const next = iconButton("next", "Next version", () => actions.choose(item, id, chosen + 1), "quiet small icon");
  next.disabled = chosen >= count - 1;
  swipe.append(prev, el("span", "swipe-count", `${chosen + 1} / ${count}`), next);
  enableSwipe(item, id);
  return swipe;
}

function replyActions(item, canRegenerate = true) {
  const bar = el("div", "turn-actions");
  if (Number(item.dataset.alternatives) > 1) bar.append(versions(item, "Versions of this reply"));
  if (canRegenerate) bar.append(iconButton("regenerate", "Regenerate", () => actions.regenerate(item), "quiet small regenerate"));
  messageTools(item, bar);
  bar.append(replyDetails(item, canRegenerate));
  return bar;
}

// A reply's Details (W8): closed by default, and filled when opened: which model wrote it and, for
// the last reply, the size of the request that produced it. The precise names live here, not in
// the conversation.
const metas = new WeakMap();

function replyDetails(item, last) {
  const box = el("details", "reply-details");
  const summary = el("summary", "reply-details-summary");
  summary.append(icon("details"), el("span", "visually-hidden", "Details"));
  summary.title = "Details";
  const list = el("dl", "reply-details-list");
  box.append(summary, list);
  box.addEventListener("toggle", () => {
    if (!box.open) return;
    const rows = [];
    const meta = metas.get(item) || {};
    if (meta.model) rows.push(["Model", meta.provider ? `${meta.model} (${meta.provider})` : meta.model]);
    if (meta.tool_rounds) rows.push(["Tool rounds", String(meta.tool_rounds)]);
    if (meta.partial) rows.push(["Stopped", "kept as it was when stopped"]);
    const size = last ? lastSize() : null;
    if (size && size.total_tokens != null) {
      const limit = size.input_limit_tokens;
      rows.push(["Request size", limit ? `${formatNumber(size.total_tokens)} of ${formatNumber(limit)} tokens`
        + ` (${Math.round((100 * size.total_tokens) / limit)}%)` : `${formatNumber(size.total_tokens)} tokens`]);
      if (size.history_messages != null) rows.push(["History messages", formatNumber(size.history_messages)]);
      if (size.capsule_tokens) rows.push(["Continuity capsule", `${formatNumber(size.capsule_tokens)} tokens`]);
    }
    if (!rows.length) rows.push(["", "Nothing more is recorded for this reply."]);
    list.replaceChildren(...rows.map(([name, value]) => {
      const row = el("div", "reply-details-row");
      row.append(el("dt", "", name), el("dd", "", value));
      return row;
    }));
  });
  return box;
}

function userActions(item) {
  const bar = el("div", "turn-actions");
  if (Number(item.dataset.alternatives) > 1) bar.append(versions(item, "Versions of your message"));
  bar.append(iconButton("edit", "Edit this message", () => startEdit(item), "quiet small edit-message"));
  return messageTools(item, bar);
}

// Touch: a horizontal swipe on a turn with versions moves to the neighbouring version.
function enableSwipe(item, id) {
  if (item.dataset.swipe) return;
  item.dataset.swipe = "on";
  let start = null;
  item.addEventListener("pointerdown", (event) => {
    if (event.pointerType === "touch") start = event.clientX;
  });
  item.addEventListener("pointerup", (event) => {
    if (start === null) return;
    const dx = event.clientX - start;
    start = null;
    const now = Number(item.dataset.chosen);
    const total = Number(item.dataset.alternatives);
    if (dx < -60 && now < total - 1) actions.choose(item, id, now + 1);
    else if (dx > 60 && now > 0) actions.choose(item, id, now - 1);
  });
}

function startEdit(item) {
  const body = item.querySelector(".body");
  const original = sources.get(item) ?? body.textContent;
  const form = el("form", "edit-form");
  const label = el("label", "visually-hidden", "Edit your message");
  const area = el("textarea");
  area.id = `edit-${item.dataset.messageId}`;
  label.htmlFor = area.id;
  area.rows = 3;
  area.value = original;
  const save = el("button", "primary small", "Save and resend");
  save.type = "submit";
  const cancel = button("Cancel", () => {
    form.remove();
    body.hidden = false;
    refreshActions();
  }, "quiet small");
  const row = el("div", "inline-row");
  row.append(save, cancel);
  form.append(label, area, row);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!area.value.trim()) return;
    form.remove();
    body.hidden = false;
    actions.edit(item, area.value);
  });
  area.addEventListener("keydown", (event) => {
    if (event.key === "Escape") cancel.click();
  });
  for (const node of item.querySelectorAll(".turn-actions")) node.remove();
  body.hidden = true;
  item.append(form);
  area.focus();
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
