// Delete forever (B4, B5) with the owner confirmation pattern: preview the counts, type the phrase,
// confirm. Used by the thread list (trash, folders, a period of time) and by each message; the
// server removes nothing if the scope changed between the preview and the confirmation.

import { apiJson, button, el } from "./api.js";

export const PHRASE = "FORGET FOREVER";

function describe(counts) {
  const parts = [];
  if (counts.conversations) parts.push(`${counts.conversations} conversation${counts.conversations === 1 ? "" : "s"}`);
  if (counts.messages) parts.push(`${counts.messages} message${counts.messages === 1 ? "" : "s"}`);
  if (counts.folders) parts.push(`${counts.folders} folder`);
  if (counts.memories) parts.push(`${counts.memories} memor${counts.memories === 1 ? "y" : "ies"}`);
  if (counts.documents) parts.push(`${counts.documents} archive document${counts.documents === 1 ? "" : "s"}`);
  return parts.length ? parts.join(", ") : "nothing";
}

// A "Delete forever" control for one target: {target, id?, start?, end?}, or a function giving it
// at the moment of the click (the period form). onDone(receipt) runs after success; report(text,
// kind) shows progress and errors.
export function forgetControl(label, target, ariaLabel, onDone, report) {
  const wrap = el("span", "forget-control");
  const start = button(label, async () => {
    try {
      const what = typeof target === "function" ? target() : target;
      await startForget(wrap, what, () => wrap.replaceChildren(start), onDone, report);
    } catch (error) {
      report(error.message, "error");
    }
  }, "quiet small danger", ariaLabel);
  wrap.append(start);
  return wrap;
}

// The confirmation alone, in `wrap`, for a control of its own (a message's More menu): previews the
// counts (a failed preview throws) and asks for the phrase; Cancel calls restore().
export async function startForget(wrap, what, restore, onDone, report) {
  const preview = await apiJson("POST", "/api/forget/preview", what);
  wrap.replaceChildren(confirmForm(preview, what, restore, onDone, report));
  wrap.querySelector("input")?.focus();
}

function confirmForm(preview, what, restore, onDone, report) {
  const form = el("form", "forget-confirm");
  form.append(el("p", "small", `This removes ${describe(preview.counts)} and everything derived from them, for good.`));
  const input = el("input");
  input.type = "text";
  input.autocomplete = "off";
  input.setAttribute("aria-label", `Type ${PHRASE} to confirm`);
  input.placeholder = PHRASE;
  const go = el("button", "danger small", "Delete forever");
  go.type = "submit";
  const cancel = button("Cancel", restore, "quiet small");
  form.append(input, go, cancel);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    go.disabled = true;
    try {
      const receipt = await apiJson("POST", "/api/forget", { ...what, token: preview.token, phrase: input.value });
      report(`Deleted forever: ${describe(receipt.counts)}.`, "success");
      await onDone(receipt);
    } catch (error) {
      go.disabled = false;
      report(error.message, "error");
    }
  });
  return form;
}

// "Forget everything between two dates" (B5): the conversations begun in the period go whole,
// elsewhere the turns inside it, with the memories, archive documents, search-log entries and
// suggestions made in it. Both days are included.
export function periodForm(onDone, report) {
  const form = el("div", "forget-period");
  const from = el("input");
  from.type = "date";
  from.setAttribute("aria-label", "Forget from (first day)");
  const to = el("input");
  to.type = "date";
  to.setAttribute("aria-label", "Forget until (last day)");
  const row = el("div", "inline-row");
  row.append(el("span", "small", "From"), from, el("span", "small", "to"), to);
  const what = () => {
    if (!from.value || !to.value) throw new Error("Choose the first and the last day of the period.");
    return { target: "range", start: from.value, end: to.value };
  };
  form.append(el("p", "small muted", "Forget everything between two dates: conversations begun then, "
    + "messages, memories, archive documents, searches and suggestions from those days."), row,
  forgetControl("Forget this period", what, "Forget this period: everything in it, forever", onDone, report));
  return form;
}
