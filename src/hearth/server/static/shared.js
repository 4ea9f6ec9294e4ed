// State shared between the panels: the thread list, folders, personas and the open conversation,
// plus the few helpers every panel needs to name a thread or a persona.

import { $, say } from "./api.js";

export const shared = {
  conversations: [], folders: [], personas: [], current: null,
  view: "", // the panel on screen
  shown: null, // id of the conversation whose messages are on screen
  sending: false, // a reply is streaming
  branching: false, // a Branch request is running
};

export function conversationTitle(c) {
  return c.title || "Untitled conversation";
}

export function personaName(id) {
  const persona = shared.personas.find((p) => p.id === id);
  return persona ? persona.display_name : "Companion";
}

// The chat's status line (below the messages).
export function setStatus(text, kind = "info") {
  say($("status"), text, kind);
}

// Opens a conversation in the chat view (switching views through the hash).
export function openConversation(id) {
  if (window.location.hash === `#conversation-${id}` && shared.view === "chat") return;
  window.location.hash = `conversation-${id}`;
}
