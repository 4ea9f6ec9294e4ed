// Tools -> Backup and export (W7): the caller's Hearth export downloaded with a progress bar, and a
// verified backup of the database (owner, password set). Import lives in imports.js.

import { $, api, apiJson, el, formatNumber, say } from "./api.js";

const ui = {
  exportAll: $("export-all"),
  backup: $("backup-now"),
  progress: $("backup-progress"),
  status: $("backup-status"),
};

function busy(on) {
  ui.exportAll.disabled = on;
  if (ui.backup) ui.backup.disabled = on;
  ui.progress.hidden = !on;
}

// Reads the download as it arrives, so the bar shows how much of it is here.
async function download() {
  busy(true);
  ui.progress.removeAttribute("value");
  say(ui.status, "Preparing the export…");
  try {
    const response = await api("GET", "/api/exports/hearth");
    const total = Number(response.headers.get("Content-Length")) || 0;
    const reader = response.body.getReader();
    const parts = [];
    let received = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parts.push(value);
      received += value.length;
      if (total) ui.progress.value = Math.round((received / total) * 100);
      say(ui.status, `Downloading… ${formatNumber(Math.round(received / 1024))} kB`);
    }
    const name = (/filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "") || [])[1]
      || "hearth-export.json";
    const link = el("a");
    link.href = URL.createObjectURL(new Blob(parts, { type: "application/json" }));
    link.download = name;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
    say(ui.status, `Downloaded ${name} (${formatNumber(Math.round(received / 1024))} kB).`, "success");
  } catch (error) {
    say(ui.status, `The export failed: ${error.message}`, "error");
  } finally {
    busy(false);
  }
}

async function backupNow() {
  busy(true);
  ui.progress.removeAttribute("value"); // the server copies and verifies in one step
  say(ui.status, "Backing up and verifying…");
  try {
    const made = await apiJson("POST", "/api/maintenance/backup");
    say(ui.status, `Backup ${made.file} written and verified (${formatNumber(Math.round(made.bytes / 1024))} kB).`,
      "success");
  } catch (error) {
    say(ui.status, `The backup failed: ${error.message}`, "error");
  } finally {
    busy(false);
  }
}

ui.exportAll.addEventListener("click", download);
if (ui.backup) ui.backup.addEventListener("click", backupNow);
