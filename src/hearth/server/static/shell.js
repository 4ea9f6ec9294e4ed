// Hearth web UI entry point: navigation between the panels (the address hash selects one) and start-up.
// Each concern lives in its own module: threads.js (the thread list), chat.js (the open conversation),
// messages.js (message bubbles), composer.js (sending and streamed replies), branch.js (Branch / Fresh
// Chat), sidepanel.js (estimate, request size, memory snapshot), and one module per other panel.
// User text is only ever placed with textContent, never parsed as HTML.

import { $, apiJson, leaveForLogin } from "./api.js";
import { setStatus, shared } from "./shared.js";
import { loadConversations, loadPersonas } from "./threads.js";
import { prefetchConversation, renderHeader, selectConversation } from "./chat.js";
import "./composer.js";
import "./branch.js";
import "./voice.js";
import "./drafts.js";
import "./layout.js";
import "./phone.js";
import "./shortcuts.js";
import "./appearance.js";
import "./install.js";
import "./backups.js";
import { showWelcome } from "./welcome.js";
import { closeArchived, openArchived } from "./archived.js";
import { showMemory } from "./memory.js";
import { showPersonas } from "./personas.js";
import { showLayers } from "./layers.js";
import { showRecall } from "./recall.js";
import { showTimeline } from "./timeline.js";
import { showTools } from "./tools.js";
import { showImports } from "./imports.js";
import { showSettings } from "./settings.js";
import { showAdmin } from "./admin.js";

const state = shared;

const VIEWS = {
  chat: null, memory: showMemory, personas: showPersonas, layers: showLayers, recall: showRecall, timeline: showTimeline,
  tools: () => Promise.all([showTools(), showImports()]),
  settings: showSettings, accounts: showAdmin,
};

function viewFromHash() {
  const hash = window.location.hash.slice(1);
  if (/^conversation-\d+$/.test(hash)) return { view: "chat", conversation: Number(hash.split("-")[1]) };
  // An imported ChatGPT or Claude conversation, read only, in place of the chat (archived.js).
  if (/^archived-\d+$/.test(hash)) return { view: "chat", conversation: null, archived: Number(hash.split("-")[1]) };
  return { view: hash in VIEWS ? hash : "chat", conversation: null };
}

async function route() {
  const { view, conversation, archived } = viewFromHash();
  const changed = view !== state.view;
  state.view = view;
  for (const node of document.querySelectorAll(".view")) node.hidden = node.dataset.view !== view;
  for (const link of document.querySelectorAll(".main-nav a")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  try {
    if (view === "chat" && archived) {
      await openArchived(archived);
    } else if (view === "chat") {
      closeArchived();
      if (conversation && (!state.current || state.current.id !== conversation || state.shown !== conversation)) {
        await selectConversation(conversation);
      } else if (state.current && state.shown !== state.current.id) {
        await selectConversation(state.current.id); // kept from another panel, not shown yet
      } else if (state.current) {
        history.replaceState(null, "", `#conversation-${state.current.id}`);
      } else {
        await showWelcome(); // a fresh deployment: two ways in instead of an empty chat
      }
    } else {
      if (changed) document.querySelector(`#view-${view} h1`).focus();
      await VIEWS[view]();
    }
  } catch (error) {
    setStatus(error.message, "error");
  }
}

const logout = $("logout");
if (logout) {
  logout.addEventListener("click", async () => {
    try {
      await apiJson("POST", "/api/auth/logout");
    } finally {
      leaveForLogin();
    }
  });
}

window.addEventListener("hashchange", route);

async function start() {
  try {
    const { view, conversation } = viewFromHash();
    if (view === "chat" && conversation) prefetchConversation(conversation);
    await Promise.all([loadPersonas(), loadConversations()]);
    const remembered = Number(sessionStorage.getItem("hearth.open"));
    if (view !== "chat" && remembered) {
      // Panels about the open conversation (Layers) keep it over a reload.
      state.current = await apiJson("GET", `/api/conversations/${remembered}`).catch(() => null);
    }
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
