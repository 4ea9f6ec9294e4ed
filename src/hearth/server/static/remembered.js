// "What I remembered" under a reply (W11): a disclosure, closed by default, read from the records
// the reply's own send saved (GET .../messages/{id}/remembered): the memories its thread carried,
// the lore its words brought in, turns recalled from this and earlier conversations, archive
// excerpts and the chat it carried over from. Each links to its source: a message opens in its
// thread, a memory in Memory, lore in What I know, an imported document as itself. A reply that
// remembered nothing shows nothing. messages.js calls attachRemembered() for each reply it draws.

import { apiJson, el } from "./api.js";
import { shared } from "./shared.js";

const checked = new WeakSet(); // bubbles already decided (a disclosure added, or nothing to add)

const SECTIONS = [
  ["memories", "Things I know about you"],
  ["fragments", "Lore that came up"],
  ["here", "Earlier in this chat"],
  ["recall", "From earlier conversations"],
  ["archive", "From your archive"],
  ["handoff", "Carried over from your last chat"],
];

const hasAny = (recorded) => Boolean(recorded) && ["memories", "fragments", "recall", "archive", "handoff"]
  .some((key) => (Array.isArray(recorded[key]) ? recorded[key].length : recorded[key]));

// For a reply drawn from the server (its metadata holds what its send recorded); called again when
// it is drawn for another version of the reply (regenerated, swiped): that version's own record.
export function attachRemembered(item, message) {
  if (!message || message.role !== "assistant" || !message.id) return;
  checked.add(item);
  item.querySelector(":scope > .remembered")?.remove();
  const recorded = (message.metadata || {}).remembered;
  if (hasAny(recorded)) place(item, disclosure(item));
}

// A reply that streamed in has no metadata on the page yet: asked once, when the reply has ended.
export function checkReplies() {
  const replies = [...document.querySelectorAll("#messages .message.role-assistant[data-message-id]")]
    .filter((node) => node.dataset.messageId && node.dataset.kind !== "handoff_artifact" && !checked.has(node));
  for (const node of replies.slice(-3)) {
    checked.add(node);
    const conversation = currentConversation();
    if (!conversation) return;
    read(conversation, node.dataset.messageId).then((found) => {
      if (found && hasAny(found) && node.isConnected && !node.querySelector(".remembered")) {
        const box = disclosure(node, found);
        place(node, box);
      }
    }).catch(() => {}); // nothing to show is the quiet answer
  }
}

const currentConversation = () => shared.current?.id ?? null;

function read(conversationId, messageId) {
  return apiJson("GET", `/api/conversations/${conversationId}/messages/${messageId}/remembered`);
}

// After the bubble's text, before its actions.
function place(item, box) {
  const body = item.querySelector(".body");
  if (body) body.after(box);
  else item.append(box);
}

function disclosure(item, found = null) {
  const box = el("details", "remembered");
  box.append(el("summary", "remembered-summary", "What I remembered"));
  const content = el("div", "remembered-content");
  box.append(content);
  let loaded = false;
  const fill = (data) => {
    loaded = true;
    content.replaceChildren(...sections(data));
  };
  if (found) fill(found);
  box.addEventListener("toggle", async () => {
    if (!box.open || loaded) return;
    content.replaceChildren(el("p", "muted small", "Looking…"));
    const conversation = currentConversation();
    try {
      fill(await read(conversation, item.dataset.messageId));
    } catch (error) {
      content.replaceChildren(el("p", "error small", error.message));
    }
  });
  return box;
}

function groups(data) {
  return {
    memories: data.memories.map((m) => ({ text: m.text, link: `#memory`, kind: "memory", id: m.id, go: "Open in Memory" })),
    fragments: data.fragments.map((f) => ({
      text: f.triggers.length ? `${f.triggers.join(", ")}: ${f.text}` : f.text,
      link: "#layers", kind: "lore", id: f.id, go: "Open in What I know",
    })),
    here: data.recall.filter((r) => r.this_conversation).map(turn),
    recall: data.recall.filter((r) => !r.this_conversation).map(turn),
    archive: data.archive.map((a) => (a.kind === "chunk"
      ? { text: a.text, title: a.title, date: a.date, link: `#archived-${a.document_id}`, go: `Open “${a.title}”` }
      : turn(a))),
    handoff: data.handoff ? [{
      text: data.handoff.title || "Your last chat",
      link: data.handoff.conversation_id ? `#conversation-${data.handoff.conversation_id}` : `#archived-${data.handoff.document_id}`,
      go: "Open that chat",
    }] : [],
  };
}

function turn(r) {
  return {
    text: r.text, title: r.this_conversation ? "" : (r.title || "Untitled conversation"), date: r.date,
    who: r.role === "user" ? "You" : "", link: `#conversation-${r.conversation_id}`, kind: "message", id: r.message_id,
    go: r.this_conversation ? "Show this message" : `Open in “${r.title || "Untitled conversation"}”`,
  };
}

function sections(data) {
  const all = groups(data);
  const out = [];
  for (const [key, heading] of SECTIONS) {
    const items = all[key];
    if (!items.length) continue;
    const section = el("section", `remembered-section remembered-${key}`);
    section.append(el("h3", "remembered-heading", heading));
    const ul = el("ul", "remembered-list");
    for (const entry of items) ul.append(row(entry));
    section.append(ul);
    if (key === "memories" && data.memories_more) section.append(el("p", "muted small", "…and more in Memory."));
    out.push(section);
  }
  if (!out.length) out.push(el("p", "muted small", "Nothing this time."));
  return out;
}

const DAY = new Intl.DateTimeFormat(undefined, { dateStyle: "medium" });

function day(stamp) {
  const date = new Date(stamp);
  return Number.isNaN(date.getTime()) ? "" : DAY.format(date);
}

function row(entry) {
  const li = el("li", "remembered-item");
  const meta = [entry.who, entry.title, entry.date ? day(entry.date) : ""].filter(Boolean).join(" · ");
  if (meta) li.append(el("span", "remembered-meta", meta));
  li.append(el("span", "remembered-text", entry.text), " ");
  const link = el("a", "remembered-link", entry.go);
  link.href = entry.link;
  if (entry.kind) {
    link.dataset.kind = entry.kind;
    link.dataset.id = String(entry.id);
    link.addEventListener("click", () => follow(entry));
  }
  li.append(link);
  return li;
}

// After the address changes (the panel or thread opens), the source itself is brought into view
// and marked, for as long as it takes to draw (a few seconds at most); a panel that draws its list
// twice gets the mark on the new row too.
const TARGETS = {
  message: (id) => `#messages .message[data-message-id="${id}"]`,
  memory: (id) => `#memory-list .memory-item[data-id="${id}"]`,
  lore: (id) => `[data-fragment-id="${id}"]`,
};

function follow(entry) {
  const selector = TARGETS[entry.kind](Number(entry.id));
  const until = Date.now() + 8000;
  let marked = null;
  let settled = 0;
  const look = () => {
    const node = document.querySelector(selector);
    if (node && node.offsetParent !== null && node !== marked) {
      marked = node;
      settled = Date.now() + 1500;
      node.classList.add("remembered-target");
      if (!node.hasAttribute("tabindex")) node.setAttribute("tabindex", "-1");
      node.scrollIntoView({ block: "center" });
      node.focus({ preventScroll: true });
      setTimeout(() => node.classList.remove("remembered-target"), 4000);
    }
    if (Date.now() < (marked ? settled : until)) setTimeout(look, 100);
  };
  setTimeout(look, 0);
}
