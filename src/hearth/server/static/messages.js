// The message list of the open conversation: one bubble per message (Markdown through markdown.js),
// and the handoff artifact laid out as elements with textContent.

import { $, el } from "./api.js";
import { personaName } from "./shared.js";
import { renderMarkdown } from "./markdown.js";

const list = $("messages");

export function clearMessages() {
  list.replaceChildren();
}

export function addMessage(message, personaId) {
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
    const body = el("div", "body markdown");
    renderMarkdown(body, message.content);
    item.append(body);
  }
  list.append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

export function showMessages(messages, personaId) {
  list.replaceChildren();
  for (const m of messages) addMessage(m, personaId);
  // A fresh branch starts at its handoff: show it from the top.
  if (messages.length && messages.every((m) => m.kind === "handoff_artifact")) list.scrollTop = 0;
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
