// A menu button (the WAI-ARIA menu button pattern): a disclosure button that opens a short menu of
// actions. Enter, Space or ↓ opens it on the first item (↑ on the last), ↑ ↓ Home End move, Enter
// or Space chooses, Escape closes it and gives the focus back to the button, Tab or a click
// elsewhere closes it. Escape stops here, so it never also stops a streaming reply.

import { el } from "./api.js";

let counter = 0;
let openMenu = null; // the one open menu: { close }

// items: [{ label, action, className?, ariaLabel? }]; returns the wrapper holding button and menu.
export function menuButton(label, items, { ariaLabel, className = "quiet small" } = {}) {
  counter += 1;
  const wrap = el("span", "menu-wrap");
  const toggle = el("button", `${className} menu-button`, label);
  toggle.type = "button";
  if (ariaLabel) toggle.setAttribute("aria-label", ariaLabel);
  toggle.setAttribute("aria-haspopup", "menu");
  toggle.setAttribute("aria-expanded", "false");
  const menu = el("div", "menu");
  menu.id = `menu-${counter}`;
  menu.setAttribute("role", "menu");
  menu.setAttribute("aria-label", ariaLabel || label);
  menu.hidden = true;
  toggle.setAttribute("aria-controls", menu.id);
  // The items are made the first time the menu opens: a thread has one menu per message, and most
  // are never opened.
  let entries = [];
  const fill = () => {
    if (entries.length || !items.length) return;
    entries = items.map((item) => {
      const entry = el("button", `menu-item ${item.className || ""}`.trim(), item.label);
      entry.type = "button";
      entry.setAttribute("role", "menuitem");
      entry.tabIndex = -1;
      if (item.ariaLabel) entry.setAttribute("aria-label", item.ariaLabel);
      entry.addEventListener("click", () => {
        close(true);
        item.action();
      });
      return entry;
    });
    menu.append(...entries);
  };
  wrap.append(toggle, menu);

  const outside = (event) => {
    if (!wrap.contains(event.target)) close(false);
  };
  function close(refocus) {
    if (menu.hidden) return;
    menu.hidden = true;
    menu.classList.remove("up");
    toggle.setAttribute("aria-expanded", "false");
    document.removeEventListener("pointerdown", outside, true);
    if (openMenu && openMenu.close === close) openMenu = null;
    if (refocus) toggle.focus();
  }
  function open(at) {
    fill();
    if (openMenu) openMenu.close(false);
    menu.hidden = false;
    toggle.setAttribute("aria-expanded", "true");
    openMenu = { close };
    document.addEventListener("pointerdown", outside, true);
    // Opens upwards when the room below (in the scrolling list, or the window) is too small.
    const room = wrap.closest(".messages")?.getBoundingClientRect().bottom ?? window.innerHeight;
    if (menu.getBoundingClientRect().bottom > room) menu.classList.add("up");
    entries[at === "last" ? entries.length - 1 : 0]?.focus();
  }
  const move = (step) => {
    const at = entries.indexOf(document.activeElement);
    entries[(at + step + entries.length) % entries.length].focus();
  };

  toggle.addEventListener("click", () => (menu.hidden ? open("first") : close(true)));
  toggle.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      open(event.key === "ArrowUp" ? "last" : "first");
    }
  });
  menu.addEventListener("keydown", (event) => {
    const keys = {
      ArrowDown: () => move(1),
      ArrowUp: () => move(-1),
      Home: () => entries[0].focus(),
      End: () => entries[entries.length - 1].focus(),
      Escape: () => close(true),
    };
    if (event.key === "Tab") {
      close(false);
      return;
    }
    if (!keys[event.key]) return;
    event.preventDefault();
    event.stopPropagation();
    keys[event.key]();
  });
  return wrap;
}
