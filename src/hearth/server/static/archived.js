// Imported conversations (A5, X4, W4): a ChatGPT or Claude export goes into the archive, one document
// per conversation, and stays there: its chunks are what search and recall read. This opens such a
// document as a read-only thread (#archived-<id>): its turns with speaker and time, Markdown through
// the sanitising renderer, newest first page and "Show earlier turns" (GET .../turns, 100 at a time),
// no message box, and "Continue in a new chat" (POST .../continue: a new chat whose handoff is its last
// turns). The thread list gets an "Imported conversations" group, loaded when opened, like the trash.
// The view and the group are built here and placed beside the chat, as the welcome is (welcome.js).

import { $, apiJson, button, el, formatDate, say } from "./api.js";
import { renderMarkdown } from "./markdown.js";
import { forgetControl } from "./forget.js";
import { setStatus, shared } from "./shared.js";
import { loadConversations } from "./threads.js";
import { selectConversation } from "./chat.js";
import { closePanels } from "./layout.js";

const PAGE = 100;
const LIST_PAGE = 50;
const SOURCES = { chatgpt: "ChatGPT", claude: "Claude" };
const chatView = $("view-chat");
const chat = chatView.querySelector("section.chat");

// -- the thread list's group --------------------------------------------------------------------------
const group = el("details", "trash imported-group");
group.id = "imported-group";
const summary = el("summary", "", "Imported conversations ");
const count = el("span", "count");
summary.append(count);
const groupList = el("ul", "conversation-list");
groupList.id = "imported-list";
groupList.setAttribute("aria-label", "Imported conversations");
const groupMore = button("Show more imported", () => loadList(true).catch(report), "quiet small more");
groupMore.hidden = true;
group.append(summary, groupList, groupMore);
$("trash").before(group);

let listed = [];
let listMore = false;

async function loadList(more = false) {
  const params = new URLSearchParams({ limit: String(LIST_PAGE), offset: String(more ? listed.length : 0) });
  for (const source of Object.keys(SOURCES)) params.append("source", source);
  const page = await apiJson("GET", `/api/archive/documents?${params}`);
  listed = more ? listed.concat(page) : page;
  listMore = page.length >= LIST_PAGE;
  drawList();
}

function dated(d) {
  if (!d.document_date) return [];
  return [/^\d{4}-\d{2}-\d{2}$/.test(d.document_date) ? d.document_date : formatDate(d.document_date)];
}

function describe(d) {
  const parts = [SOURCES[d.source] || "Archive", ...dated(d)];
  if (typeof d.turns === "number") parts.push(`${d.turns} ${d.turns === 1 ? "turn" : "turns"}`);
  return parts.join(" · ");
}

function drawList() {
  count.textContent = listed.length ? `${listed.length}${listMore ? "+" : ""}` : "";
  groupList.replaceChildren();
  if (!listed.length) {
    groupList.append(el("li", "muted empty", "None yet: import a ChatGPT or Claude export under Tools."));
  }
  for (const d of listed) {
    const item = el("li");
    const node = el("button", "conversation");
    node.type = "button";
    node.dataset.documentId = String(d.id);
    if (d.id === openId) node.setAttribute("aria-current", "true");
    node.append(el("span", "conversation-title", d.title), el("span", "conversation-meta", describe(d)));
    node.addEventListener("click", () => {
      window.location.hash = `archived-${d.id}`;
      closePanels(); // on a phone the drawer closes on a choice
    });
    item.append(node);
    groupList.append(item);
  }
  groupMore.hidden = !listMore;
}

group.addEventListener("toggle", () => {
  if (group.open) loadList().catch(report);
});

function report(error) {
  setStatus(error.message, "error");
}

// -- the read-only thread -----------------------------------------------------------------------------
const section = el("section", "chat archived-thread");
section.id = "archived";
section.hidden = true;
section.setAttribute("aria-labelledby", "archived-title");
const header = el("header", "chat-header");
const heading = el("div", "chat-heading");
const title = el("h1", "", "Imported conversation");
title.id = "archived-title";
title.tabIndex = -1;
const meta = el("p", "chat-meta");
heading.append(title, meta);
const actions = el("div", "chat-actions archived-actions");
header.append(heading, actions);
const turns = el("ol", "messages archived-turns");
turns.tabIndex = 0; // the turns scroll: reachable by keyboard even where they hold no link
turns.setAttribute("aria-label", "Turns of this conversation");
const earlier = el("li", "archived-earlier");
earlier.append(button("Show earlier turns", () => showEarlier().catch((e) => say(status, e.message, "error")),
  "quiet small more"));
const status = el("p", "status");
status.setAttribute("role", "status");
status.setAttribute("aria-live", "polite");
const notice = el("div", "imported-notice");
notice.setAttribute("role", "note");
const noticeText = el("p");
const continueButton = button("Continue in a new chat", () => continueChat(), "primary");
notice.append(noticeText, continueButton);
section.append(header, turns, status, notice);
chat.after(section);

let openId = null;
let shown = null; // {document, first, passages} of what is on screen

function speaker(t) {
  if (t.speaker) return t.speaker;
  return t.role === "user" ? "You" : t.role === "assistant" ? "Assistant" : "";
}

function turnNode(t) {
  const item = el("li", `message role-${t.role === "user" ? "user" : "assistant"} archived-turn`);
  const who = el("div", "who");
  if (speaker(t)) who.append(el("span", "", speaker(t)));
  if (t.created_at) {
    const time = el("time", "turn-time", formatDate(t.created_at));
    time.dateTime = t.created_at;
    who.append(time);
  }
  const body = el("div", "body markdown");
  renderMarkdown(body, t.text); // markdown-it without HTML, then DOMPurify: nothing in a turn runs
  item.append(who, body);
  return item;
}

function drawHeader(page) {
  const d = page.document;
  title.textContent = d.title;
  const size = page.passages ? `${page.total} ${page.total === 1 ? "passage" : "passages"}`
    : `${page.total} ${page.total === 1 ? "turn" : "turns"}`;
  meta.textContent = [`Imported from ${SOURCES[d.source] || "the archive"}`, ...dated(d), size].join(" · ");
  noticeText.replaceChildren(el("strong", "", "Imported — read only. "),
    page.passages
      ? "This document was imported before Hearth kept each turn, so it is shown as the archive's passages. "
        + "Import the export again (Tools → Import) to read it turn by turn and continue it."
      : `This conversation came from ${SOURCES[d.source] || "an import"} and is kept in the archive as it was.`);
  continueButton.hidden = page.passages;
  actions.replaceChildren(forgetControl("Delete forever", { target: "document", id: d.id },
    `Delete forever: ${d.title}`, forgotten, (text, kind) => say(status, text, kind)));
}

async function forgotten() {
  closeArchived();
  window.location.hash = "chat";
  if (group.open) await loadList();
  setStatus("The imported conversation was deleted forever.");
}

function markCurrent() {
  for (const node of groupList.querySelectorAll("[data-document-id]")) {
    if (Number(node.dataset.documentId) === openId) node.setAttribute("aria-current", "true");
    else node.removeAttribute("aria-current");
  }
}

// Opens document `id` in place of the chat (app.js, for #archived-<id>).
export async function openArchived(id) {
  let page;
  try {
    page = await apiJson("GET", `/api/archive/documents/${id}/turns?limit=${PAGE}`);
  } catch (error) {
    closeArchived();
    throw error;
  }
  openId = id;
  shown = { document: page.document, first: page.turns.length ? page.turns[0].position : 0, passages: page.passages };
  shared.shown = null; // the chat's messages are off screen: choosing a thread draws it again
  drawHeader(page);
  say(status, "");
  turns.replaceChildren(...page.turns.map(turnNode));
  if (page.has_earlier) turns.prepend(earlier);
  section.hidden = false;
  chatView.classList.add("archived-open");
  markCurrent();
  turns.scrollTop = turns.scrollHeight; // the newest turns, as a thread opens
  title.focus({ preventScroll: true });
}

export function closeArchived() {
  if (openId === null) return;
  openId = null;
  shown = null;
  section.hidden = true;
  chatView.classList.remove("archived-open");
  markCurrent();
}

async function showEarlier() {
  const id = openId;
  const page = await apiJson("GET", `/api/archive/documents/${id}/turns?limit=${PAGE}&before=${shown.first}`);
  if (openId !== id) return;
  const fromBottom = turns.scrollHeight - turns.scrollTop; // the reading position stays put
  earlier.remove();
  turns.prepend(...page.turns.map(turnNode));
  if (page.has_earlier) turns.prepend(earlier);
  if (page.turns.length) shown.first = page.turns[0].position;
  turns.scrollTop = turns.scrollHeight - fromBottom;
  (page.has_earlier ? earlier.querySelector("button") : turns).focus({ preventScroll: true });
}

// One retry key per document until the new chat has opened: a double click, a lost answer or a
// reload mid-request gets the same chat (H8), as Branch does (branch.js).
async function continueChat() {
  if (openId === null || continueButton.disabled) return;
  const d = shown.document;
  const name = `hearth.continue.${d.id}`;
  const key = sessionStorage.getItem(name) || crypto.randomUUID();
  sessionStorage.setItem(name, key);
  continueButton.disabled = true;
  say(status, "Starting a new chat from this conversation…");
  try {
    const result = await apiJson("POST", `/api/archive/documents/${d.id}/continue`, { retry_key: key });
    sessionStorage.removeItem(name);
    await loadConversations();
    await selectConversation(result.conversation.id);
    setStatus(`Continuing “${d.title}” in a new chat. The handoff is the first message.`);
  } catch (error) {
    if (error.status && error.status < 500) sessionStorage.removeItem(name); // refused: a new try, a new key
    say(status, error.message, "error");
  } finally {
    continueButton.disabled = false;
  }
}

// A thread opened by any path (the list, New Chat, a link) takes the chat back from this view.
new MutationObserver(() => {
  if (openId !== null && shared.shown !== null) closeArchived();
}).observe($("chat-title"), { childList: true, characterData: true, subtree: true });
