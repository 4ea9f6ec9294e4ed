// The phone layout (W5): below 900 px the thread list is a drawer and the side panel a bottom sheet.
// Each opens from a button that says whether it is open, closes with Escape, its close button or a
// tap outside, and gives the focus back to the button that opened it.

import { $ } from "./api.js";

const ui = {
  drawerToggle: $("drawer-toggle"),
  drawerClose: $("drawer-close"),
  detailsToggle: $("details-toggle"),
  sheetClose: $("sheet-close"),
  scrim: $("scrim"),
  threads: $("threads"),
  details: $("details"),
};

const narrow = window.matchMedia("(max-width: 900px)");
let opener = null;

export function closePanels() {
  close();
}

function close() {
  const wasOpen = document.body.classList.contains("drawer-open") || document.body.classList.contains("sheet-open");
  document.body.classList.remove("drawer-open", "sheet-open");
  ui.drawerToggle.setAttribute("aria-expanded", "false");
  ui.detailsToggle.setAttribute("aria-expanded", "false");
  ui.scrim.hidden = true;
  if (wasOpen && opener) opener.focus();
  opener = null;
}

function open(kind, button, panel) {
  close();
  opener = button;
  document.body.classList.add(kind);
  button.setAttribute("aria-expanded", "true");
  ui.scrim.hidden = false;
  panel.querySelector("button, input, select, textarea, a[href]")?.focus();
}

ui.drawerToggle.addEventListener("click", () => {
  if (document.body.classList.contains("drawer-open")) close();
  else open("drawer-open", ui.drawerToggle, ui.threads);
});
// Wider screens: Details is a column beside the conversation, closed until asked for (W8).
const chatView = $("view-chat");
function setColumn(open) {
  chatView.classList.toggle("details-open", open);
  ui.detailsToggle.setAttribute("aria-expanded", String(open));
}
ui.detailsToggle.addEventListener("click", () => {
  if (!narrow.matches) {
    setColumn(!chatView.classList.contains("details-open"));
    return;
  }
  if (document.body.classList.contains("sheet-open")) close();
  else open("sheet-open", ui.detailsToggle, ui.details);
});
ui.drawerClose.addEventListener("click", close);
ui.sheetClose.addEventListener("click", () => (narrow.matches ? close() : setColumn(false)));
ui.scrim.addEventListener("click", close);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && ui.scrim.hidden === false) close();
});
// Choosing a thread or switching panels closes the drawer (threads.js removes the class too).
window.addEventListener("hashchange", () => {
  if (document.body.classList.contains("drawer-open")) close();
});
narrow.addEventListener("change", () => {
  close();
  setColumn(false);
});
