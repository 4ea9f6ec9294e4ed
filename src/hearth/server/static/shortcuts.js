// Keyboard shortcuts: single keys that act when the focus is not in a text field (so typing is never
// taken over), and the list of every shortcut of the page, opened with "?" or the top bar's "?"
// button, in a modal dialog that keeps the focus inside it and closes with Escape.

import { $, el } from "./api.js";
import { shared } from "./shared.js";

// Everything the page answers to from the keyboard (composer.js, layout.js, chat.js, messages.js,
// menu.js, speech.js and the single keys below).
const LIST = [
  ["?", "Show this list of keyboard shortcuts"],
  ["/", "Search chats (Find a conversation)"],
  ["n", "New Chat: its title field (Enter starts the chat)"],
  ["c", "Go to the message box"],
  ["Enter", "In the message box: send"],
  ["Shift + Enter", "In the message box: a new line"],
  ["Escape", "Stop the reply while it arrives; stop reading aloud; close a menu, this list, the thread list or the details"],
  ["Enter / Escape", "Renaming a conversation or editing a message: save / cancel"],
  ["↑ ↓ Home End", "In a message's More menu: move between its actions (Enter or Space chooses)"],
];

function isTyping(target) {
  if (!(target instanceof Element)) return false;
  if (target.isContentEditable) return true;
  if (target.tagName === "TEXTAREA" || target.tagName === "SELECT") return true;
  if (target.tagName !== "INPUT") return false;
  return !["checkbox", "radio", "button", "submit", "reset", "file", "range", "color"].includes(target.type);
}

let dialog = null;
let returnTo = null;

function buildDialog() {
  const node = el("dialog", "shortcuts-dialog");
  node.id = "shortcuts";
  node.setAttribute("aria-labelledby", "shortcuts-heading");
  const heading = el("h2", "", "Keyboard shortcuts");
  heading.id = "shortcuts-heading";
  const table = el("table", "shortcuts-table");
  const head = el("thead");
  const headRow = el("tr");
  for (const text of ["Keys", "What they do"]) {
    const th = el("th", "", text);
    th.scope = "col";
    headRow.append(th);
  }
  head.append(headRow);
  const body = el("tbody");
  for (const [keys, what] of LIST) {
    const row = el("tr");
    const cell = el("td");
    cell.append(el("kbd", "", keys));
    row.append(cell, el("td", "", what));
    body.append(row);
  }
  table.append(head, body);
  const note = el("p", "muted small", "Single keys work when the focus is not in a text field.");
  const close = el("button", "primary", "Close");
  close.type = "button";
  close.addEventListener("click", closeList);
  node.append(heading, table, note, close);
  node.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      // Handled here: it must not also stop a streaming reply or close the drawer behind.
      event.preventDefault();
      event.stopPropagation();
      closeList();
    } else if (event.key === "Tab") {
      // The focus stays in the list (showModal makes the page behind inert; the browser's own
      // controls would still be next).
      const stops = [...node.querySelectorAll("button, a[href], [tabindex]:not([tabindex='-1'])")];
      const first = stops[0];
      const last = stops[stops.length - 1];
      if (event.shiftKey && document.activeElement === first) {
        event.preventDefault();
        last.focus();
      } else if (!event.shiftKey && document.activeElement === last) {
        event.preventDefault();
        first.focus();
      }
    }
  });
  node.addEventListener("cancel", (event) => {
    event.preventDefault(); // closed by closeList, which gives the focus back
    closeList();
  });
  document.body.append(node);
  return node;
}

export function openList() {
  if (!dialog) dialog = buildDialog();
  if (dialog.open) return;
  returnTo = document.activeElement;
  dialog.showModal();
  dialog.querySelector("button").focus();
}

function closeList() {
  if (!dialog?.open) return;
  dialog.close();
  if (returnTo && returnTo.isConnected) returnTo.focus();
  returnTo = null;
}

// The chat panel's controls: switch to it first when another panel is shown; on a phone, open the
// thread list drawer for the controls that live in it.
function inChat(then) {
  if (shared.view !== "chat") {
    window.location.hash = shared.current ? `conversation-${shared.current.id}` : "chat";
    let tries = 0;
    const wait = () => {
      if (!$("view-chat").hidden) then();
      else if ((tries += 1) < 120) requestAnimationFrame(wait);
    };
    requestAnimationFrame(wait);
    return;
  }
  then();
}

function inThreadList(target) {
  inChat(() => {
    const toggle = $("drawer-toggle");
    const drawer = toggle && getComputedStyle(toggle).display !== "none";
    if (drawer && !document.body.classList.contains("drawer-open")) toggle.click();
    // The drawer becomes visible as it starts sliding in: until then the field cannot take the focus.
    let tries = 0;
    const focus = () => {
      target.focus();
      if (document.activeElement !== target && (tries += 1) < 60) requestAnimationFrame(focus);
    };
    focus();
  });
}

const KEYS = {
  "?": openList,
  "/": () => inThreadList($("filter-text")),
  n: () => inThreadList($("new-title")),
  c: () => inChat(() => {
    const text = $("composer-text");
    if (!text.disabled) text.focus();
  }),
};

document.addEventListener("keydown", (event) => {
  if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
  if (dialog?.open || isTyping(event.target) || event.target.closest?.("[role=menu]")) return;
  const action = KEYS[event.key];
  if (!action) return;
  event.preventDefault();
  action();
});

$("shortcuts-open")?.addEventListener("click", openList);
