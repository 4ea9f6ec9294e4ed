// Timeline panel: the relationship timeline (E8). One globally ordered list of a person's activity
// across every conversation, grouped into collapsible activity spans; each message shows the
// channel it came through; Inner Plane entries (retrieval, context, memory, tools, checkpoints)
// expand to their numbers. "Load older" asks for the page before the oldest event shown, with the
// server's compound cursor, and prepends only that page. Inner Plane payloads hold kinds, ids and
// numbers only; message text is placed with textContent, never parsed. Each kind reads as words
// (labels.js); the internal kind and its raw figures show only under "Show details".

import { $, apiJson, el, formatDate, formatNumber, say } from "./api.js";
import { shared, personaName } from "./shared.js";
import { bindDetails, eventWords } from "./labels.js";
import { markdownText } from "./markdown.js";

const ui = {
  inner: $("timeline-inner"),
  details: $("timeline-details"),
  refresh: $("timeline-refresh"),
  older: $("timeline-older"),
  status: $("timeline-status"),
  list: $("timeline-list"),
};

const INNER = ["context.", "memory.", "prompt.", "tool.", "review.", "status.", "live_context.", "summary.",
  "fragment.", "continuity.", "nudge.", "provider.", "maintenance.", "checkpoint.", "search.", "retrieval."];
const SPAN_KINDS = { text: "Text exchange", voice: "Voice session", inner: "Autonomous activation", import: "Import" };
// Fixed names (tool names, roles, error kinds) may show; anything longer or freer is left out.
const NAME = /^[A-Za-z0-9_.:-]{1,48}$/;

const state = { events: [], spans: new Map(), before: null, loading: false };

export async function showTimeline() {
  const page = await apiJson("GET", "/api/timeline");
  state.events = page.events;
  state.spans = new Map(page.spans.map((s) => [s.id, s]));
  state.before = page.before;
  render();
}

async function loadOlder() {
  if (!state.before || state.loading) return;
  state.loading = true;
  ui.older.disabled = true;
  try {
    const page = await apiJson("GET", `/api/timeline?before=${encodeURIComponent(state.before)}`);
    // Only the older page is prepended; what is already on screen stays as it is.
    state.events = page.events.concat(state.events);
    for (const span of page.spans) state.spans.set(span.id, span);
    state.before = page.before;
    render();
  } finally {
    state.loading = false;
  }
}

function isInner(event) {
  return !(event.message && "content" in event.message) && INNER.some((p) => event.kind.startsWith(p));
}

function render() {
  const shown = ui.inner.checked ? state.events.filter(isInner) : state.events;
  ui.list.replaceChildren();
  ui.older.hidden = !state.before;
  ui.older.disabled = !state.before;
  const noun = shown.length === 1 ? "event" : "events";
  say(ui.status, `${shown.length} ${noun}${ui.inner.checked ? " behind the replies" : ""}${state.before ? "; older activity can be loaded" : ""}.`);
  if (!shown.length) {
    ui.list.append(el("li", "muted empty", "Nothing yet."));
    return;
  }
  let group = null;
  let groupSpan;
  for (const event of shown) {
    let spanId = event.span_id;
    // An event outside any span that happened while the current span ran stays inside its fold.
    if (spanId === null && group !== null && groupSpan !== null && within(state.spans.get(groupSpan), event)) {
      spanId = groupSpan;
    }
    if (group === null || spanId !== groupSpan) {
      groupSpan = spanId;
      group = spanId !== null && state.spans.has(spanId) ? spanGroup(state.spans.get(spanId)) : looseGroup();
      ui.list.append(group.item);
    }
    group.list.append(entry(event));
    group.count += 1;
    group.counter.textContent = `${group.count} ${group.count === 1 ? "event" : "events"}`;
  }
}

function within(span, event) {
  return Boolean(span) && (span.closed_at === null || event.created_at <= span.closed_at);
}

function spanGroup(span) {
  const item = el("li", "span-group");
  item.dataset.spanId = String(span.id);
  const details = el("details", "span");
  details.open = true;
  const summary = el("summary", "span-summary");
  summary.append(el("span", "span-kind", SPAN_KINDS[span.kind] || span.kind));
  const when = el("time", "span-time", formatDate(span.started_at));
  when.dateTime = span.started_at;
  summary.append(when);
  summary.append(el("span", "channel", span.channel));
  const counter = el("span", "span-count", "");
  summary.append(counter);
  summary.append(el("span", `span-state ${span.open ? "open" : "closed"}`, span.open ? "open" : closedLabel(span)));
  const list = el("ol", "timeline");
  details.append(summary, list);
  item.append(details);
  return { item, list, counter, count: 0 };
}

function closedLabel(span) {
  if (span.close_reason === "idle") return span.checkpoint_event_id ? "closed after a quiet while · memory check" : "closed after a quiet while";
  return span.close_reason === "switched" ? "closed · switched activity" : "closed";
}

function looseGroup() {
  const item = el("li", "span-group loose");
  const list = el("ol", "timeline");
  const counter = el("span", "span-count", "");
  const label = el("p", "span-summary muted");
  label.append(el("span", "span-kind", "Outside any burst of activity"), counter);
  item.append(label, list);
  return { item, list, counter, count: 0 };
}

function entry(event) {
  if (event.message && "content" in event.message) return messageEntry(event);
  return innerEntry(event);
}

function messageEntry(event) {
  const item = el("li", `event message role-${event.message.role}`);
  item.dataset.kind = event.kind;
  item.dataset.role = event.message.role;
  item.append(timeOf(event));
  const who = event.message.role === "user" ? "You" : companionOf(event);
  const head = el("span", "message-head");
  head.append(el("span", "message-who", who), el("span", "channel", event.channel));
  item.append(head);
  // Plain words: the Markdown marks a chat bubble would render are dropped, never shown raw.
  item.append(el("p", "message-text", markdownText(event.message.content)));
  item.append(conversationLink(event));
  return item;
}

function companionOf(event) {
  const known = shared.conversations.find((c) => c.id === event.conversation_id);
  return known ? personaName(known.persona_id) : "Companion";
}

function innerEntry(event) {
  const item = el("li", "event inner");
  item.dataset.kind = event.kind;
  item.append(timeOf(event));
  const family = event.kind.split(".")[0];
  const words = eventWords(event);
  const label = el("span", `event-label kind-${family}`, words.label);
  if (!ui.details.checked) {
    const line = el("p", "inner-entry");
    line.append(label);
    if (words.summary) line.append(el("span", "event-summary", words.summary));
    line.append(el("span", "channel", event.channel));
    item.append(line, conversationLink(event));
    return item;
  }
  const details = el("details", "inner-entry");
  const summary = el("summary", "");
  summary.append(label);
  if (words.summary) summary.append(el("span", "event-summary", words.summary));
  summary.append(el("code", "event-kind", event.kind), el("span", "channel", event.channel));
  details.append(summary);
  const pairs = el("span", "event-details");
  for (const [key, value] of Object.entries(event.payload || {})) {
    let shown = null;
    if (typeof value === "number") shown = formatNumber(value);
    else if (typeof value === "boolean") shown = value ? "yes" : "no";
    else if (typeof value === "string" && NAME.test(value)) shown = value;
    else if (Array.isArray(value) && value.every((v) => typeof v === "number")) shown = `${value.length} ids`;
    if (shown === null) continue;
    const pair = el("span", "pair");
    pair.append(el("span", "pair-key", key), el("span", "pair-value", shown));
    pairs.append(pair);
  }
  if (!pairs.childElementCount) pairs.append(el("span", "muted", "No figures."));
  details.append(pairs);
  item.append(details);
  item.append(conversationLink(event));
  return item;
}

function timeOf(event) {
  const time = el("time", "event-time", formatDate(event.created_at));
  time.dateTime = event.created_at;
  return time;
}

function conversationLink(event) {
  if (!event.conversation_id) return el("span", "event-conversation muted", "");
  const known = shared.conversations.find((c) => c.id === event.conversation_id);
  const link = el("a", "event-conversation", known ? (known.title || "Untitled conversation") : `#${event.conversation_id}`);
  link.href = `#conversation-${event.conversation_id}`;
  return link;
}

function failed(error) {
  say(ui.status, error.message, "error");
}

ui.inner.addEventListener("change", render);
bindDetails(ui.details, render);
ui.refresh.addEventListener("click", () => showTimeline().catch(failed));
ui.older.addEventListener("click", () => loadOlder().catch(failed));
