// Two disclosures (W5, W6, W8). On a narrow screen the panel links do not fit beside the top bar's
// buttons, so they fold behind one button that names the panel shown ("Sections: Chat"); at every
// width the chat header keeps one line (the companion, the title, Details, More) with the rest (tags,
// model, presets, conversation actions) in the More panel under it. Both are disclosure buttons
// (aria-expanded): Escape closes them and gives the focus back to the button; the section list also
// closes when a section is chosen, when the focus leaves it or on a tap elsewhere. Wider screens
// never see the section button (the stylesheet hides it).

import { $ } from "./api.js";

const ui = {
  nav: document.querySelector(".main-nav"),
  navToggle: $("nav-toggle"),
  navCurrent: $("nav-current"),
  navList: $("main-nav-list"),
  header: document.querySelector(".chat-header"),
  moreToggle: $("chat-more-toggle"),
};

// -- the section list --------------------------------------------------------------------------
function navOpen() {
  return ui.navToggle.getAttribute("aria-expanded") === "true";
}

function setNav(open, refocus = false) {
  ui.navToggle.setAttribute("aria-expanded", String(open));
  ui.nav.classList.toggle("open", open);
  if (open) (ui.navList.querySelector("[aria-current=page]") || ui.navList.querySelector("a"))?.focus();
  else if (refocus) ui.navToggle.focus();
}

function showCurrent() {
  const current = ui.navList.querySelector("a[aria-current=page]");
  // The link's own words, without the pending-suggestions count beside Layers.
  ui.navCurrent.textContent = current ? current.firstChild.textContent.trim() : "Chat";
}

ui.navToggle.addEventListener("click", () => setNav(!navOpen(), navOpen()));
ui.navList.addEventListener("click", (event) => {
  if (event.target.closest("a")) setNav(false);
});
ui.nav.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && navOpen()) {
    event.stopPropagation(); // closing the list never also stops a streaming reply
    setNav(false, true);
  }
});
ui.nav.addEventListener("focusout", (event) => {
  if (navOpen() && event.relatedTarget && !ui.nav.contains(event.relatedTarget)) setNav(false);
});
document.addEventListener("pointerdown", (event) => {
  if (navOpen() && !ui.nav.contains(event.target)) setNav(false);
}, true);
// app.js marks the shown panel's link (aria-current); the button follows it.
new MutationObserver(showCurrent).observe(ui.navList, { subtree: true, attributes: true, attributeFilter: ["aria-current"] });
showCurrent();

// -- the chat header's More --------------------------------------------------------------------
function setMore(open, refocus = false) {
  ui.moreToggle.setAttribute("aria-expanded", String(open));
  ui.header.classList.toggle("more-open", open);
  if (refocus) ui.moreToggle.focus();
}

ui.moreToggle.addEventListener("click", () => setMore(ui.moreToggle.getAttribute("aria-expanded") !== "true"));
// Presets opens its own panel under the header: More folds so as not to cover it.
ui.header.addEventListener("click", (event) => {
  if (event.target.closest("#presets-toggle")) setMore(false);
});
// A tap or click outside the header folds More again (at every width: W8 keeps the header calm).
document.addEventListener("pointerdown", (event) => {
  if (ui.header.classList.contains("more-open") && !ui.header.contains(event.target)
      && !event.target.closest?.(".menu")) setMore(false);
}, true);
ui.header.addEventListener("keydown", (event) => {
  // Escape inside the rename field cancels the rename (chat.js); elsewhere in the header it folds More.
  if (event.key !== "Escape" || !ui.header.classList.contains("more-open") || event.target.closest("form")) return;
  event.stopPropagation();
  setMore(false, true);
});

window.matchMedia("(max-width: 900px)").addEventListener("change", () => {
  setNav(false);
  setMore(false);
});
