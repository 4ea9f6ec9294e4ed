// People-facing words for what the engine records: one table of event kinds (the timeline) and one
// of search origins (the search log), and the "Show details" preference that brings back the
// internal names, raw figures and per-signal scores for whoever wants them (kept in localStorage).

import { formatNumber } from "./api.js";

const n = (value) => (typeof value === "number" ? formatNumber(value) : null);
const plural = (count, one, many) => `${formatNumber(count)} ${count === 1 ? one : many}`;

// What a skipped helper task (E13) could not read; the server's words are in memory/helpers/skips.py.
const SKIPPED_TASKS = {
  memories: "memories",
  facts: "facts",
  capsule: "the chat summary",
  summary: "the summary",
  live_context: "the chat topic",
  household: "household changes",
  fragments: "lore suggestions",
  title: "the title",
  mining: "memories from the import",
};

// kind -> [label, summary(payload) -> short figures in words, or null]
export const EVENT_LABELS = {
  "conversation.created": ["Conversation started"],
  "conversation.titled": ["Conversation titled"],
  "conversation.renamed": ["Conversation renamed"],
  "conversation.moved": ["Moved to a folder"],
  "conversation.trashed": ["Moved to the trash"],
  "conversation.restored": ["Restored from the trash"],
  "conversation.shielded": ["Shielded from continuity"],
  "conversation.shield_released": ["Shield released"],
  "conversation.ended": ["Conversation ended"],
  "conversation.branched": ["Branched into a fresh chat"],
  "conversation.instructions_set": ["Conversation instructions changed"],
  "conversation.model_set": ["Conversation model changed", (p) => (p.default ? "back to the default" : null)],
  "conversation.pinned": ["Pinned"],
  "conversation.unpinned": ["Unpinned"],
  "conversation.tagged": ["Tags changed"],
  "folder.hidden": ["Folder hidden"],
  "folder.shown": ["Folder shown"],
  "folder.renamed": ["Folder renamed"],
  "folder.deleted": ["Folder deleted"],
  "message.regenerated": ["Reply regenerated"],
  "message.edited": ["Message edited"],
  "message.alternative_chosen": ["Another version chosen"],
  "span.opened": ["Activity started"],
  "span.closed": ["Activity ended", (p) => ({ idle: "after a quiet while", switched: "switched activity" }[p.reason] || null)],
  "checkpoint.created": ["Memory check", (p) => (typeof p.suggestions === "number"
    ? `${plural(p.turns || 0, "turn", "turns")} read, ${plural(p.suggestions, "suggestion", "suggestions")}` : null)],
  "context.request_size": ["Request size", (p) => (n(p.total_tokens)
    ? `${n(p.total_tokens)} tokens${n(p.input_limit_tokens) ? ` of ${n(p.input_limit_tokens)}` : ""}` : null)],
  "context.usage": ["Model usage", (p) => (n(p.input) ? `${n(p.input)} tokens in, ${n(p.output) || 0} out` : null)],
  "context.capsule": ["Chat summary refreshed"],
  "context.compacted": ["Earlier turns condensed", (p) => (p.mode === "manual" ? "on request" : p.mode === "auto" ? "automatically" : null)],
  "continuity.captured": ["Continuity carried over"],
  "memory.added": ["Memory added"],
  "memory.edited": ["Memory edited"],
  "memory.deleted": ["Memory deleted"],
  "memory.moved": ["Memory reordered"],
  "memory.ended": ["Memory ended"],
  "memory.restored": ["Memory restored"],
  "memory.snapshot_refreshed": ["Memory refreshed in the conversation"],
  "memory.snapshot_backfill": ["Memories of the chat filled in"],
  "memory.judge_fallback": ["Memory check fell back to rules"],
  "helper.skipped": ["Skipped for now", (p) => `${SKIPPED_TASKS[p.task] || "a helper answer"} could not be read this time`],
  "fragment.added": ["Lore entry added"],
  "fragment.edited": ["Lore entry edited"],
  "fragment.removed": ["Lore entry removed"],
  "fragment_book.scoped": ["Lorebook scope changed"],
  "status.changed": ["Household status changed"],
  "status.field_added": ["Status field added"],
  "status.field_removed": ["Status field removed"],
  "review.proposed": ["Suggestion for review"],
  "review.approved": ["Suggestion approved"],
  "review.dismissed": ["Suggestion dismissed"],
  "live_context.refreshed": ["Chat topic refreshed"],
  "live_context.edited": ["Chat topic edited"],
  "summary.refreshed": ["Summary refreshed"],
  "prompt.rebuilt": ["Conversation prompt rebuilt"],
  "tool.call": ["Tool used", (p) => (typeof p.name === "string" ? p.name.replace(/_/g, " ") : null)],
  "provider.error": ["The model did not answer", (p) => (p.retryable === true ? "can be retried" : null)],
  "nudge.used": ["Nudge used"],
  "maintenance.continuity_cleanup": ["Continuity cleanup"],
  "forget.receipt": ["Deleted forever"],
  "voice.started": ["Voice session started"],
  "voice.ended": ["Voice session ended"],
  "voice.call_placed": ["Call placed"],
  "activation.created": ["Activation scheduled"],
  "activation.fired": ["Activation ran"],
  "activations.started": ["Activations started"],
  "activations.stopped": ["Activations stopped"],
  "user.display_name_set": ["Your name changed"],
};

// A saved message that is not a chat turn (the stored prompt, a handoff, a summary...).
const MESSAGE_KINDS = {
  static_prompt: "Conversation prompt saved",
  handoff_artifact: "Handoff saved",
  compaction: "Condensed history saved",
};

function fallback(kind) {
  // A kind without a label still reads as words, never as a dotted name.
  const words = kind.replace(/[._:]+/g, " ").trim();
  return words ? words[0].toUpperCase() + words.slice(1) : "Event";
}

// { label, summary } for an event of the timeline.
export function eventWords(event) {
  if (event.kind === "message") {
    const kind = event.message?.kind || event.payload?.kind;
    return { label: MESSAGE_KINDS[kind] || "Message saved", summary: null };
  }
  const [label, summary] = EVENT_LABELS[event.kind] || [fallback(event.kind)];
  return { label, summary: summary ? summary(event.payload || {}) : null };
}

export const ORIGIN_LABELS = {
  keyword_recall: "Automatic: your other conversations",
  thread_recall: "Automatic: earlier in this conversation",
  archive_recall: "Automatic: archive and older conversations",
  "tool:search_past_conversations": "Companion searched past conversations",
  "tool:search_archive": "Companion searched the archive",
  "mcp:search_conversations": "Connected app searched conversations",
  "mcp:search_archive": "Connected app searched the archive",
  owner: "Your search",
  benchmark: "Benchmark",
};

export function originLabel(origin) {
  return ORIGIN_LABELS[origin] || fallback(origin);
}

export const RELIABILITY_LABELS = { high: "reliable", medium: "fairly reliable", low: "weak matches", none: "nothing found" };

// The "Show details" preference, shared by the panels that have one.
const KEY = "hearth.showDetails";
const listeners = new Set();

export function detailsShown() {
  try {
    return localStorage.getItem(KEY) === "true";
  } catch {
    return false; // storage refused (a private window): details stay off
  }
}

// Binds a checkbox to the preference; onChange runs when it changes here or in another panel.
export function bindDetails(checkbox, onChange) {
  checkbox.checked = detailsShown();
  listeners.add({ checkbox, onChange });
  checkbox.addEventListener("change", () => {
    try {
      localStorage.setItem(KEY, String(checkbox.checked));
    } catch {
      // not kept over a reload, but this page follows the choice
    }
    for (const l of listeners) {
      l.checkbox.checked = checkbox.checked;
      l.onChange();
    }
  });
}
