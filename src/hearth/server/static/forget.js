// Delete forever (B4, B5) with the owner confirmation pattern: preview the counts, type the phrase,
// confirm. Used by the thread list (trash, folders); the server removes nothing if the scope changed.

import { apiJson, button, el } from "./api.js";

export const PHRASE = "FORGET FOREVER";

function describe(counts) {
  const parts = [];
  if (counts.conversations) parts.push(`${counts.conversations} conversation${counts.conversations === 1 ? "" : "s"}`);
  if (counts.messages) parts.push(`${counts.messages} message${counts.messages === 1 ? "" : "s"}`);
  if (counts.folders) parts.push(`${counts.folders} folder`);
  if (counts.memories) parts.push(`${counts.memories} memor${counts.memories === 1 ? "y" : "ies"}`);
  return parts.length ? parts.join(", ") : "nothing";
}

// A "Delete forever" control for one target: {target, id?}. onDone(receipt) runs after success;
// report(text, kind) shows progress and errors.
export function forgetControl(label, what, ariaLabel, onDone, report) {
  const wrap = el("span", "forget-control");
  const start = button(label, async () => {
    try {
      const preview = await apiJson("POST", "/api/forget/preview", what);
      wrap.replaceChildren(confirmForm(preview, what, wrap, start, onDone, report));
      wrap.querySelector("input")?.focus();
    } catch (error) {
      report(error.message, "error");
    }
  }, "quiet small danger", ariaLabel);
  wrap.append(start);
  return wrap;
}

function confirmForm(preview, what, wrap, start, onDone, report) {
  const form = el("form", "forget-confirm");
  form.append(el("p", "small", `This removes ${describe(preview.counts)} and everything derived from them, for good.`));
  const input = el("input");
  input.type = "text";
  input.autocomplete = "off";
  input.setAttribute("aria-label", `Type ${PHRASE} to confirm`);
  input.placeholder = PHRASE;
  const go = el("button", "danger small", "Delete forever");
  go.type = "submit";
  const cancel = button("Cancel", () => wrap.replaceChildren(start), "quiet small");
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
