// The chat header's context meter (E7): the last input usage as a percentage of the compaction
// threshold, whether a continuity capsule is active, the last compaction time, and Compact now.
// Self-contained: it follows the open conversation through the address (#conversation-N) and
// refreshes when the message list changes (a reply finished) or the window regains focus.

import { $, apiJson, formatDate, say } from "./api.js";
import { shared } from "./shared.js";

const ui = {
  meter: $("context-meter"),
  usage: $("context-usage"),
  capsule: $("context-capsule"),
  compacted: $("context-compacted"),
  compact: $("compact-now"),
  status: $("context-status"),
  messages: $("messages"),
};

let current = null; // the figures shown, or null
let compacting = false;

function openId() {
  const match = window.location.hash.match(/^#conversation-(\d+)$/);
  if (match) return Number(match[1]);
  return shared.current ? shared.current.id : null;
}

export async function refreshContext() {
  const id = openId();
  if (!id) {
    current = null;
    render();
    return;
  }
  try {
    const figures = await apiJson("GET", `/api/conversations/${id}/context`);
    if (openId() === id) {
      current = figures;
      render();
    }
  } catch (_) {
    current = null; // an unknown or trashed thread: the chat says why
    render();
  }
}

function render() {
  ui.meter.hidden = !current;
  if (!current) return;
  const against = current.threshold_kind === "compaction" ? "of the compaction threshold" : "of the input limit";
  ui.usage.textContent = `Input ${current.percent}% ${against}`;
  ui.usage.title = `${current.input_tokens} of ${current.threshold_tokens} tokens in the last request`;
  ui.meter.dataset.capsule = current.capsule_active ? "active" : "none";
  ui.capsule.textContent = current.capsule_active
    ? `Capsule active (${current.capsule_source === "model" ? "model-written" : "offline"})` : "No capsule";
  ui.compacted.textContent = current.last_compaction_at
    ? `Compacted ${formatDate(current.last_compaction_at)}` : "Not compacted";
  ui.compact.hidden = !current.compaction_available;
  ui.compact.disabled = compacting || shared.sending || current.running !== "idle";
  ui.compact.title = ui.compact.disabled ? "Unavailable while a reply or compaction runs" : "Shorten the model's working context now";
}

async function compactNow() {
  const id = openId();
  if (!id || compacting) return;
  compacting = true;
  render();
  say(ui.status, "Compacting…");
  try {
    const result = await apiJson("POST", `/api/conversations/${id}/compact`, {});
    say(ui.status, result.capsule_id ? "Compacted; the capsule was refreshed." : "Compacted.");
  } catch (error) {
    say(ui.status, error.message, "error");
  } finally {
    compacting = false;
    await refreshContext();
  }
}

let timer = null;
function soon() {
  clearTimeout(timer);
  timer = setTimeout(() => refreshContext(), 250);
}

ui.compact.addEventListener("click", compactNow);
window.addEventListener("hashchange", soon);
window.addEventListener("focus", soon);
// Only a new last message (a reply finished, another thread opened) changes the figures; older
// turns drawn above it as the person scrolls up, or while the page is idle, do not.
let newest = null;
new MutationObserver(() => {
  if (ui.messages.lastElementChild === newest) return;
  newest = ui.messages.lastElementChild;
  soon();
}).observe(ui.messages, { childList: true });
soon();
