// Small line icons for the message actions (W8), drawn as inline SVG so they follow the text colour
// and need no font or file. Each icon button carries its name as aria-label and as a tooltip
// (title); the drawing is decoration (aria-hidden).

import { el } from "./api.js";

const NS = "http://www.w3.org/2000/svg";

// 20 × 20 strokes, drawn for this project.
const PATHS = {
  copy: "M7 7h9v10H7z M4 13V3h9",
  speak: "M3 8h3l4-3v10l-4-3H3z M13 7.5a3.5 3.5 0 0 1 0 5 M15.5 5a7 7 0 0 1 0 10",
  stop: "M6 6h8v8H6z",
  regenerate: "M16 10a6 6 0 1 1-2-4.5 M16 3v4h-4",
  edit: "M4 16l1-4 8-8 3 3-8 8z M11 6l3 3",
  more: "M4.6 10h.8 M9.6 10h.8 M14.6 10h.8",
  prev: "M12 5l-5 5 5 5",
  next: "M8 5l5 5-5 5",
  details: "M10 9v5 M10 6h.01 M10 2a8 8 0 1 0 0 16a8 8 0 1 0 0-16",
  mic: "M10 3a2.5 2.5 0 0 1 2.5 2.5v4a2.5 2.5 0 0 1-5 0v-4A2.5 2.5 0 0 1 10 3z M5 9.5a5 5 0 0 0 10 0 M10 14.5V17",
  check: "M4 10l4 4 8-8",
  attach: "M13.5 6.5l-6 6a1.8 1.8 0 0 0 2.5 2.5l6.5-6.5a3.5 3.5 0 0 0-5-5L5 10a5 5 0 0 0 7 7l5-5",
};

// Each icon is drawn once and copied after that: a thread's bubbles carry several each.
const drawn = new Map();

function draw(name) {
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 20 20");
  svg.setAttribute("width", "18");
  svg.setAttribute("height", "18");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  svg.classList.add("icon-svg");
  const path = document.createElementNS(NS, "path");
  path.setAttribute("d", PATHS[name] || PATHS.more);
  if (name === "more") path.setAttribute("stroke-width", "3"); // dots, not dashes
  svg.append(path);
  return svg;
}

export function icon(name) {
  if (!drawn.has(name)) drawn.set(name, draw(name));
  return drawn.get(name).cloneNode(true);
}

// Puts an icon and a name on a button (the name as aria-label and tooltip, nothing visible).
export function setIcon(node, name, label) {
  node.replaceChildren(icon(name));
  node.setAttribute("aria-label", label);
  node.title = label;
  node.classList.add("icon-button");
  return node;
}

export function iconButton(name, label, onClick, className = "quiet small") {
  const node = el("button", className);
  node.type = "button";
  setIcon(node, name, label);
  if (onClick) node.addEventListener("click", onClick);
  return node;
}
