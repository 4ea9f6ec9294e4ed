// Memory where the person talks (W11): one quiet notice above the message box when Hearth has
// suggestions from this thread waiting ("Hearth noticed 2 things to remember"). Opening it lists
// them, each with the person's own words it came from; Keep, Edit and Not now decide them in place
// through the review queue's routes (F3, G4: the same rules as Layers → Review queue). Read when a
// thread opens and after each reply ends; gone when nothing waits.

import { $, apiJson, button, el } from "./api.js";
import { conflictView } from "./conflict.js";
import { setStatus, shared } from "./shared.js";
import { checkReplies } from "./remembered.js";
import { renderSnapshot } from "./sidepanel.js";

const notice = el("section", "memory-notice");
notice.id = "memory-notice";
notice.hidden = true;
notice.setAttribute("aria-label", "Things to remember");
const toggle = button("", () => setOpen(toggle.getAttribute("aria-expanded") !== "true"), "memory-notice-toggle");
toggle.setAttribute("aria-expanded", "false");
toggle.setAttribute("aria-controls", "memory-notice-list");
const list = el("ul", "memory-notice-list");
list.id = "memory-notice-list";
list.hidden = true;
notice.append(toggle, list);
$("messages").after(notice);

let shownFor = null; // the thread whose suggestions are drawn
let waiting = [];
let kept = 0;
let editing = null; // the id of the suggestion being edited

function setOpen(open) {
  toggle.setAttribute("aria-expanded", String(open));
  list.hidden = !open;
}

const countText = (n) => (n === 1 ? "1 thing" : `${n} things`);

// The suggestion in people's words: what would be kept, never the queue's kind names.
function wording(p) {
  const d = p.payload;
  if (p.kind === "memory_add") return d.text;
  if (p.kind === "status_change") return `${d.field}: ${d.from || "not set"} → ${d.to}`;
  if (p.kind === "fragment_add" || p.kind === "fragment_update") {
    const words = (d.triggers || []).join(", ");
    return words ? `When ${words} comes up: ${d.definition}` : d.definition;
  }
  if (p.kind === "checkin") return `Check in ${String(d.at || "").slice(0, 16).replace("T", " ")}: ${d.note}`;
  return p.label;
}

// The one field an in-place edit changes, per kind (the review queue's editable fields).
const EDITED = { memory_add: "text", status_change: "to", fragment_add: "definition", fragment_update: "definition", checkin: "note" };

// Reads the open thread's suggestions and redraws the notice; `conversationId` defaults to the open one.
export async function refreshNotice(conversationId) {
  const id = conversationId ?? shared.current?.id;
  checkReplies(); // a reply that has just streamed in learns what it remembered
  if (!id) {
    hideNotice();
    return;
  }
  let found;
  try {
    found = await apiJson("GET", `/api/conversations/${id}/suggestions`);
  } catch (error) {
    return; // a thread closed or forgotten meanwhile: nothing to offer
  }
  if (!shared.current || shared.current.id !== id) return;
  if (shownFor !== id) setOpen(false);
  const changed = shownFor === id && (found.suggestions.length !== waiting.length || found.memories_kept !== kept);
  shownFor = id;
  waiting = found.suggestions;
  kept = found.memories_kept;
  draw();
  // The Details panel's memory line counts these too: redrawn when they changed.
  if (changed) apiJson("GET", `/api/conversations/${id}/snapshot`).then(renderSnapshot).catch(() => {});
}

export function hideNotice() {
  shownFor = null;
  waiting = [];
  notice.hidden = true;
}

function draw() {
  notice.hidden = waiting.length === 0; // gone once everything is decided
  toggle.textContent = `Hearth noticed ${countText(waiting.length)} to remember`;
  if (!waiting.length) setOpen(false);
  list.replaceChildren(...waiting.map(item));
}

function item(p) {
  const li = el("li", "memory-notice-item");
  li.dataset.proposalId = String(p.id);
  const text = wording(p);
  if (editing === p.id) {
    li.append(editor(p));
    return li;
  }
  li.append(el("p", "memory-notice-text", text));
  if (p.evidence) {
    const quote = el("blockquote", "memory-notice-quote");
    quote.append(el("span", "visually-hidden", "You said: "), document.createTextNode(`“${p.evidence}”`));
    li.append(quote);
  }
  if (p.kind === "memory_add" && p.payload.conflict) {
    li.append(conflictView(p, (resolution) => decide(p, "approve", { resolution })));
  }
  const actions = el("div", "memory-notice-actions");
  const short = text.length > 60 ? `${text.slice(0, 57)}…` : text;
  if (!(p.kind === "memory_add" && p.payload.conflict)) {
    actions.append(button("Keep", () => decide(p, "approve"), "primary", `Keep: ${short}`));
  }
  actions.append(
    button("Edit", () => { editing = p.id; draw(); list.querySelector(".memory-notice-edit textarea")?.focus(); },
      "quiet", `Edit: ${short}`),
    button("Not now", () => decide(p, "dismiss"), "quiet", `Not now: ${short}`),
  );
  li.append(actions);
  return li;
}

function editor(p) {
  const key = EDITED[p.kind];
  const form = el("form", "memory-notice-edit");
  const label = el("label", "", "Say it your way");
  const area = el("textarea");
  area.id = `memory-notice-edit-${p.id}`;
  label.htmlFor = area.id;
  area.rows = 2;
  area.value = String(p.payload[key] ?? "");
  const save = el("button", "primary", "Keep my version");
  save.type = "submit";
  const actions = el("div", "memory-notice-actions");
  actions.append(save, button("Cancel", () => { editing = null; draw(); }, "quiet"));
  form.append(label, area, actions);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const edits = { [key]: area.value.trim() };
    if (p.kind === "memory_add" && p.payload.conflict) edits.resolution = "keep_both";
    decide(p, "approve", edits);
  });
  return form;
}

async function decide(p, action, edits) {
  const id = shownFor;
  try {
    await apiJson("POST", `/api/review/${p.id}/${action}`, action === "approve" ? { edits: edits || {} } : undefined);
    editing = null;
    setStatus(action === "approve"
      ? "Kept. New chats will know it; this one picks it up with Refresh memory in Details."
      : "Left out. Hearth will not suggest it again unchanged.", "success");
  } catch (error) {
    setStatus(error.message, "error");
  }
  await refreshNotice(id);
  // The focus stays in the notice (the next suggestion, or its toggle), or returns to the message box.
  const next = list.querySelector(".memory-notice-actions button");
  if (next) next.focus();
  else if (!notice.hidden) toggle.focus();
  else $("composer-text").focus();
}

export const noticeCounts = () => ({ waiting: waiting.length, kept });
