// The chat's side panel and header figures: the compact estimate (R4), the request-size details of
// the last request (R2) and the thread's memory snapshot with Refresh memory (M4).

import { $, apiJson, el, formatDate, formatNumber, say } from "./api.js";
import { shared } from "./shared.js";

const ui = {
  estimate: $("estimate-text"),
  snapshotInfo: $("snapshot-info"),
  refreshMemory: $("refresh-memory"),
  snapshotStatus: $("snapshot-status"),
  sizePanel: $("size-panel"),
  sizeEmpty: $("size-empty"),
  sizeMeter: $("size-meter"),
};

export function renderEstimate(estimate) {
  if (!estimate) {
    ui.estimate.textContent = "–";
    return;
  }
  const noun = estimate.messages === 1 ? "message" : "messages";
  ui.estimate.textContent = `${formatNumber(estimate.messages)} ${noun} · ~${formatNumber(estimate.tokens)} tokens`;
}

const SIZE_ROWS = [
  ["total_tokens", "Total"],
  ["input_limit_tokens", "Input limit"],
  ["remaining_tokens", "Remaining"],
  ["static_prompt_tokens", "Static prompt"],
  ["post_history_tokens", "Post-history instructions"],
  ["capsule_tokens", "Continuity capsule"],
  ["history_tokens", "History"],
  ["history_messages", "History messages"],
  ["history_trimmed_messages", "Trimmed messages"],
  ["dynamic_context_tokens", "Dynamic context"],
  ["handoff_tokens", "Handoff"],
  ["summary_tokens", "Summary"],
  ["user_message_tokens", "Your message"],
  ["attachments_tokens", "Attachments (counted above)"], // W14: inside "Your message" and "History"
  ["attachments_count", "Attached files"],
  ["tools_tokens", "Tools"],
  ["tools_count", "Tool definitions"],
];

function sub(parts) {
  for (const [name, tokens] of Object.entries(parts || {})) {
    const row = el("div", "size-row sub");
    row.append(el("dt", "", `· ${name}`), el("dd", "", formatNumber(tokens)));
    ui.sizePanel.append(row);
  }
}

let shownSize = null;

// The figures of the last request, for the last reply's Details (messages.js).
export function lastSize() {
  return shownSize;
}

export function renderSize(size) {
  shownSize = size;
  ui.sizePanel.replaceChildren();
  if (!size) {
    ui.sizeMeter.hidden = true;
    ui.sizePanel.hidden = true;
    ui.sizeEmpty.hidden = false;
    return;
  }
  ui.sizeEmpty.hidden = true;
  ui.sizePanel.hidden = false;
  ui.sizeMeter.replaceChildren();
  ui.sizeMeter.hidden = !size.input_limit_tokens;
  if (size.input_limit_tokens) {
    const meter = el("meter", "size-meter");
    meter.min = 0;
    meter.max = size.input_limit_tokens;
    meter.value = size.total_tokens || 0;
    meter.high = size.input_limit_tokens * 0.85;
    meter.setAttribute("aria-label", "Share of the input limit used");
    ui.sizeMeter.append(meter);
  }
  for (const [key, label] of SIZE_ROWS) {
    if (!(key in size)) continue;
    const row = el("div", "size-row");
    row.dataset.key = key;
    row.append(el("dt", "", label), el("dd", "", formatNumber(size[key])));
    ui.sizePanel.append(row);
    // The static prompt's sections (a card's example dialogue among them), already in its total.
    if (key === "static_prompt_tokens") sub(size.static_sections);
  }
  sub(size.dynamic_blocks);
  if (size.estimate_method) {
    const row = el("div", "size-row note");
    row.append(el("dt", "", "Estimated by"), el("dd", "", size.estimate_method));
    ui.sizePanel.append(row);
  }
}

export function renderSnapshot(snapshot) {
  if (!snapshot) {
    ui.snapshotInfo.textContent = "Open a conversation to see its memory snapshot.";
    return;
  }
  const info = snapshot.info;
  const count = snapshot.memories.length;
  const parts = [`${count} ${count === 1 ? "memory" : "memories"} in this thread`];
  // W11: memories kept since the thread began reach new chats; suggestions wait in the thread.
  if (snapshot.kept !== undefined && snapshot.kept !== count) parts.push(`${snapshot.kept} kept in all`);
  if (snapshot.waiting) parts.push(`${snapshot.waiting} ${snapshot.waiting === 1 ? "suggestion" : "suggestions"} waiting`);
  if (info.refreshed_at) parts.push(`refreshed ${formatDate(info.refreshed_at)}`);
  else if (info.captured_at) parts.push(`captured ${formatDate(info.captured_at)}`);
  ui.snapshotInfo.textContent = parts.join(" · ");
}

export function clearSnapshotStatus() {
  say(ui.snapshotStatus, "");
}

export function setRefreshEnabled(enabled) {
  ui.refreshMemory.disabled = !enabled;
}

ui.refreshMemory.addEventListener("click", async () => {
  const c = shared.current;
  if (!c) return;
  ui.refreshMemory.disabled = true;
  say(ui.snapshotStatus, "Refreshing…");
  try {
    await apiJson("POST", `/api/conversations/${c.id}/snapshot/refresh`);
    renderSnapshot(await apiJson("GET", `/api/conversations/${c.id}/snapshot`));
    say(ui.snapshotStatus, "Memory refreshed: this thread now uses the current memories.", "success");
  } catch (error) {
    say(ui.snapshotStatus, `Memory was not refreshed: ${error.message}`, "error");
  } finally {
    ui.refreshMemory.disabled = !shared.current;
  }
});
