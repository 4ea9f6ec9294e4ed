// The app shell: navigation between the panels (the address hash selects one) and start-up, run by
// app.js once it has asked for the first screen's data.
// Each concern lives in its own module: threads.js (the thread list), chat.js (the open conversation),
// messages.js (message bubbles), composer.js (sending and streamed replies), branch.js (Branch / Fresh
// Chat), sidepanel.js (estimate, request size, memory snapshot), and one module per other panel.
// User text is only ever placed with textContent, never parsed as HTML.

import { $, apiJson, dropEarly, leaveForLogin } from "./api.js";
import { setStatus, shared } from "./shared.js";
import { loadMe } from "./profile.js";
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
import "./context.js"; // the chat header's context meter (E7)
import { closeArchived, openArchived } from "./archived.js";

const state = shared;

// The page starts with the chat's modules only; each other panel's module (and the welcome's) is
// fetched the first time it is shown, so a thread and its list are drawn without waiting for a dozen
// panels nobody has opened yet. Once the page is ready and idle, the browser fetches them ahead
// (modulepreload: fetched and compiled, not run), so a panel opens without waiting for the network.
const VIEWS = {
  chat: null,
  memory: { load: () => import("./memory.js"), show: (memory) => memory.showMemory() },
  personas: { load: () => import("./personas.js"), show: (personas) => personas.showPersonas() },
  layers: { load: () => import("./layers.js"), show: (layers) => layers.showLayers() },
  recall: { load: () => import("./recall.js"), show: (recall) => recall.showRecall() },
  timeline: { load: () => import("./timeline.js"), show: (timeline) => timeline.showTimeline() },
  tools: {
    load: () => Promise.all([import("./tools.js"), import("./imports.js"), import("./backups.js")]),
    show: ([tools, imports]) => Promise.all([tools.showTools(), imports.showImports()]),
  },
  settings: { load: () => import("./settings.js"), show: (settings) => settings.showSettings() },
  accounts: { load: () => import("./admin.js"), show: (admin) => admin.showAdmin() },
};
// What preloadLater fetches: the modules above, what they import that the chat does not, and the
// welcome's.
const LATER = ["memory", "personas", "layers", "recall", "timeline", "labels", "tools", "imports", "backups", "settings",
  "admin", "welcome"];

function preloadLater() {
  for (const name of LATER) {
    const link = document.createElement("link");
    link.rel = "modulepreload";
    link.href = `/static/${name}.js`;
    document.head.append(link);
  }
}

function viewFromHash() {
  const hash = window.location.hash.slice(1);
  if (/^conversation-\d+$/.test(hash)) return { view: "chat", conversation: Number(hash.split("-")[1]) };
  // An imported ChatGPT or Claude conversation, read only, in place of the chat (archived.js).
  if (/^archived-\d+$/.test(hash)) return { view: "chat", conversation: null, archived: Number(hash.split("-")[1]) };
  return { view: hash in VIEWS ? hash : "chat", conversation: null };
}

async function route() {
  const { view, conversation, archived } = viewFromHash();
  let panel = null;
  if (VIEWS[view]) {
    // The panel's module first: Settings and Accounts build their page when it runs.
    try {
      panel = await VIEWS[view].load();
    } catch (error) {
      setStatus(error.message, "error");
      return;
    }
    if (viewFromHash().view !== view) return; // the address changed meanwhile: its own route shows it
  }
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
        // A fresh deployment: two ways in instead of an empty chat.
        await (await import("./welcome.js")).showWelcome();
      }
    } else {
      if (changed) document.querySelector(`#view-${view} h1`).focus();
      await VIEWS[view].show(panel);
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
    loadMe().catch(() => {}); // the person's name on their messages, the owner's Accounts entry
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
  dropEarly(); // an early answer nothing took (a filter kept in the box) is not kept for later
  document.body.dataset.ready = "true";
  (window.requestIdleCallback || ((fn) => setTimeout(fn, 200)))(preloadLater, { timeout: 5000 });
}

start();
