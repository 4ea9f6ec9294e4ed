// Tools panel: Continuity Cleanup. A fresh count-only preview every time the panel opens; deleting
// needs the preview's scope token, the verified-backup checkbox and the exact phrase. When the scope
// changed since the preview, nothing is removed and both confirmations are cleared.

import { $, apiJson, el, formatDate, formatNumber, say } from "./api.js";

const PHRASE = "DELETE RETIRED GENERATED SUMMARIES";
const BASE = "/api/maintenance/continuity-cleanup";

const ui = {
  box: $("cleanup"),
  preview: $("cleanup-preview"),
  numbers: $("cleanup-numbers"),
  form: $("cleanup-form"),
  backup: $("cleanup-backup"),
  phrase: $("cleanup-phrase"),
  remove: $("cleanup-delete"),
  status: $("cleanup-status"),
};

let current = null; // the last preview

export async function showTools() {
  if (!ui.box) return; // no owner password: the page explains why the tool is unavailable
  await preview();
}

function clearConfirmations() {
  ui.backup.checked = false;
  ui.phrase.value = "";
  updateButton();
}

function updateButton() {
  if (!ui.box) return;
  ui.remove.disabled = !(current && current.candidates > 0 && ui.backup.checked && ui.phrase.value === PHRASE);
}

async function preview(note) {
  const before = current;
  try {
    current = await apiJson("GET", `${BASE}/preview`);
  } catch (error) {
    current = null;
    ui.numbers.replaceChildren();
    say(ui.status, error.message, "error");
    updateButton();
    return;
  }
  ui.numbers.replaceChildren();
  const add = (label, value) => ui.numbers.append(el("dt", "", label), el("dd", "", value));
  add("Rows to remove", formatNumber(current.candidates));
  add("Handoffs kept", formatNumber(current.protected_handoffs));
  add("Oldest", current.oldest ? formatDate(current.oldest) : "–");
  add("Newest", current.newest ? formatDate(current.newest) : "–");
  const confirmed = ui.backup.checked || ui.phrase.value;
  if (before && before.token !== current.token && confirmed) {
    clearConfirmations();
    say(ui.status, "The rows in scope changed since the last preview; nothing was removed. Confirm again.", "error");
  } else if (note) {
    say(ui.status, note.text, note.kind);
  } else {
    say(ui.status, current.candidates ? "Preview ready." : "Nothing to remove.");
  }
  updateButton();
}

if (ui.box) {
  ui.preview.addEventListener("click", () => preview());
  ui.backup.addEventListener("change", updateButton);
  ui.phrase.addEventListener("input", updateButton);
  ui.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!current) return;
    ui.remove.disabled = true;
    try {
      const receipt = await apiJson("POST", `${BASE}/delete`, {
        token: current.token, backup_verified: ui.backup.checked, phrase: ui.phrase.value,
      });
      clearConfirmations();
      const noun = receipt.removed === 1 ? "row" : "rows";
      await preview({ text: `Removed ${formatNumber(receipt.removed)} ${noun}.`, kind: "success" });
    } catch (error) {
      if (error.status === 409 && /scope changed/.test(error.message)) {
        clearConfirmations();
        await preview({ text: "The rows in scope changed since the preview; nothing was removed. "
          + "Review the new preview and confirm again.", kind: "error" });
      } else {
        say(ui.status, error.message, "error");
        updateButton();
      }
    }
  });
}
