// Timeline panel: the newest ledger events across conversations as a compact activity list. The
// "Inner Plane" filter keeps the events behind the replies (context use, memory, prompts, tools).
// Events carry kinds, ids and numbers only; nothing here shows conversation text.

import { $, apiJson, el, formatDate, formatNumber, say } from "./api.js";
import { shared } from "./shared.js";

const ui = {
  inner: $("timeline-inner"),
  refresh: $("timeline-refresh"),
  status: $("timeline-status"),
  list: $("timeline-list"),
};

const INNER = ["context.", "memory.", "prompt.", "tool.", "review.", "status.", "live_context.", "summary.",
  "fragment.", "continuity.", "nudge.", "provider.", "maintenance."];
// Fixed names (tool names, roles, error kinds) may show; anything longer or freer is left out.
const NAME = /^[A-Za-z0-9_.:-]{1,48}$/;

export async function showTimeline() {
  const events = await apiJson("GET", "/api/events?limit=300");
  const shown = (ui.inner.checked ? events.filter((e) => INNER.some((p) => e.kind.startsWith(p))) : events)
    .slice().reverse();
  ui.list.replaceChildren();
  say(ui.status, `${shown.length} ${shown.length === 1 ? "event" : "events"}${ui.inner.checked ? " on the Inner Plane" : ""}.`);
  if (!shown.length) ui.list.append(el("li", "muted empty", "Nothing yet."));
  for (const event of shown) ui.list.append(eventItem(event));
}

function eventItem(event) {
  const item = el("li", "event");
  item.dataset.kind = event.kind;
  const time = el("time", "event-time", formatDate(event.created_at));
  time.dateTime = event.created_at;
  item.append(time);
  const family = event.kind.split(".")[0];
  item.append(el("span", `event-kind kind-${family}`, event.kind));
  const details = el("span", "event-details");
  for (const [key, value] of Object.entries(event.payload || {})) {
    let shown = null;
    if (typeof value === "number") shown = formatNumber(value);
    else if (typeof value === "boolean") shown = value ? "yes" : "no";
    else if (typeof value === "string" && NAME.test(value)) shown = value;
    else if (Array.isArray(value) && value.every((v) => typeof v === "number")) shown = `${value.length} ids`;
    if (shown === null) continue;
    const pair = el("span", "pair");
    pair.append(el("span", "pair-key", key), el("span", "pair-value", shown));
    details.append(pair);
  }
  item.append(details);
  if (event.conversation_id) {
    const known = shared.conversations.find((c) => c.id === event.conversation_id);
    const link = el("a", "event-conversation", known ? (known.title || "Untitled conversation") : `#${event.conversation_id}`);
    link.href = `#conversation-${event.conversation_id}`;
    item.append(link);
  }
  return item;
}

ui.inner.addEventListener("change", () => showTimeline().catch((e) => say(ui.status, e.message, "error")));
ui.refresh.addEventListener("click", () => showTimeline().catch((e) => say(ui.status, e.message, "error")));
