// Attachments (W14) and one conversation's export (W15).
//
// The composer gets an Attach button, a hidden file picker and a row of chips (one per file, each
// with a Remove button); files also arrive by paste into the message box and by drop onto the
// composer. Text files are read as text, images (PNG, JPEG, GIF, WebP) as base64. The server
// checks every limit again and says which one a file passed. The owners of the composer and the
// messages call two functions, at one line each use:
//   hasAttachments()          -> whether files wait (a message may be files alone)
//   takeAttachments()         -> {body, shown, restore}: the send request's files, the sent bubble's,
//                                and putting them back if the send failed
//   showAttachments(item, m)  -> a message's files under its bubble
// The export buttons (Markdown, JSON) are added to the conversation's More menu.

import { $, el } from "./api.js";
import { icon } from "./icons.js";
import { setStatus, shared } from "./shared.js";

const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const TEXT_EXTENSIONS = /\.(txt|md|markdown|csv|tsv|json|jsonl|xml|yaml|yml|toml|ini|log|html?|css|js|mjs|ts|py|rb|go|rs|java|c|h|cpp|sh|sql|srt|vtt|tex)$/i;

let pending = []; // {name, media_type, kind, size, text?, data?}

const composer = $("composer");
const text = $("composer-text");

function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

// -- the composer: button, picker, chips, paste and drop --------------------------------------------
const picker = el("input", "visually-hidden");
picker.type = "file";
picker.multiple = true;
picker.id = "attach-input";
picker.tabIndex = -1;
picker.setAttribute("aria-hidden", "true");
picker.accept = [...IMAGE_TYPES, "text/*", ".md", ".csv", ".json", ".yaml", ".yml", ".toml", ".log"].join(",");

const attachButton = el("button", "quiet attach-button icon-button");
attachButton.type = "button";
attachButton.id = "attach-button";
attachButton.append(icon("attach"));
attachButton.setAttribute("aria-label", "Attach files");
attachButton.title = "Attach text files or pictures (or paste or drop them here)";

const chips = el("ul", "attach-chips");
chips.id = "attach-chips";
chips.setAttribute("aria-label", "Files to send");
chips.hidden = true;

if (composer && text) {
  composer.before(chips); // above the composer's row, which keeps its own layout
  text.before(attachButton);
  composer.append(picker);
  attachButton.disabled = text.disabled;
  // The box is disabled while no conversation is open or it is read only: so is the button.
  new MutationObserver(() => {
    attachButton.disabled = text.disabled;
  }).observe(text, { attributes: true, attributeFilter: ["disabled"] });
  attachButton.addEventListener("click", () => picker.click());
  picker.addEventListener("change", () => {
    addFiles([...picker.files]);
    picker.value = "";
  });
  text.addEventListener("paste", (event) => {
    const files = [...(event.clipboardData?.files || [])];
    if (!files.length) return; // ordinary text pastes as usual
    event.preventDefault();
    addFiles(files);
  });
  composer.addEventListener("dragover", (event) => {
    if (text.disabled || ![...(event.dataTransfer?.types || [])].includes("Files")) return;
    event.preventDefault();
    composer.classList.add("attach-dropping");
  });
  composer.addEventListener("dragleave", () => composer.classList.remove("attach-dropping"));
  composer.addEventListener("drop", (event) => {
    composer.classList.remove("attach-dropping");
    if (text.disabled || !event.dataTransfer?.files?.length) return;
    event.preventDefault();
    addFiles([...event.dataTransfer.files]);
  });
}

function readAs(file, how) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    if (how === "text") reader.readAsArrayBuffer(file);
    else reader.readAsDataURL(file);
  });
}

// One file as the send request carries it, or a sentence saying why it cannot be attached.
async function prepare(file) {
  const name = file.name || (file.type.startsWith("image/") ? `pasted.${file.type.split("/")[1]}` : "pasted.txt");
  if (IMAGE_TYPES.includes(file.type)) {
    const url = await readAs(file, "data");
    return { name, media_type: file.type, kind: "image", size: file.size, data: url.slice(url.indexOf(",") + 1) };
  }
  if (file.type.startsWith("image/")) return `${name}: only PNG, JPEG, GIF and WebP pictures can be attached.`;
  if (file.type && !file.type.startsWith("text/") && !TEXT_EXTENSIONS.test(name) && file.type !== "application/json") {
    return `${name} is not a text file or a picture, so it cannot be attached.`;
  }
  const bytes = await readAs(file, "text");
  let content;
  try {
    content = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (_) {
    return `${name} is not readable text (UTF-8), so it cannot be attached.`;
  }
  if (content.includes("\u0000")) return `${name} is not a text file, so it cannot be attached.`;
  return { name, media_type: file.type || "text/plain", kind: "text", size: file.size, text: content };
}

export async function addFiles(files) {
  const problems = [];
  for (const file of files) {
    try {
      const ready = await prepare(file);
      if (typeof ready === "string") problems.push(ready);
      else pending.push(ready);
    } catch (_) {
      problems.push(`${file.name || "A file"} could not be read.`);
    }
  }
  drawChips();
  if (problems.length) setStatus(problems.join(" "), "error");
  else if (files.length) setStatus(`${pending.length === 1 ? "1 file" : `${pending.length} files`} ready to send.`);
}

function drawChips() {
  chips.replaceChildren(...pending.map((file, index) => {
    const chip = el("li", `attach-chip attach-${file.kind}`);
    if (file.kind === "image") {
      const thumb = el("img", "attach-thumb");
      thumb.alt = "";
      thumb.src = `data:${file.media_type};base64,${file.data}`;
      chip.append(thumb);
    }
    chip.append(el("span", "attach-name", file.name), el("span", "attach-size", sizeText(file.size)));
    const remove = el("button", "quiet small attach-remove", "×");
    remove.type = "button";
    remove.setAttribute("aria-label", `Remove ${file.name}`);
    remove.title = `Remove ${file.name}`;
    remove.addEventListener("click", () => {
      pending.splice(index, 1);
      drawChips();
      text.focus();
    });
    chip.append(remove);
    return chip;
  }));
  chips.hidden = pending.length === 0;
  composer?.classList.toggle("has-attachments", pending.length > 0);
}

export function hasAttachments() {
  return pending.length > 0;
}

// The files of the message being sent, taken out of the composer: `body` joins the send request,
// `shown` the sent bubble (until the thread reloads), and `restore()` puts them back when the send
// failed, as the words go back to the box.
export function takeAttachments() {
  const taken = pending;
  pending = [];
  drawChips();
  const body = !taken.length ? {} : {
    attachments: taken.map(({ name, media_type, text: content, data }) =>
      (data !== undefined ? { name, media_type, data } : { name, media_type, text: content })),
  };
  const shown = taken.map(({ name, media_type, kind, size, data }) => ({
    name, media_type, kind, size, preview: data !== undefined ? `data:${media_type};base64,${data}` : null,
  }));
  return {
    body,
    shown,
    restore() {
      pending = [...taken, ...pending];
      drawChips();
    },
  };
}

// -- a message's files --------------------------------------------------------------------------------
export function showAttachments(item, message) {
  const files = message.attachments || [];
  item.querySelector(".message-attachments")?.remove();
  if (!files.length) return;
  const list = el("ul", "message-attachments");
  list.setAttribute("aria-label", files.length === 1 ? "1 attached file" : `${files.length} attached files`);
  const conversation = shared.current?.id;
  for (const file of files) {
    const entry = el("li", `attach-chip attach-${file.kind}`);
    const url = file.id && conversation ? `/api/conversations/${conversation}/attachments/${file.id}` : file.preview;
    if (file.kind === "image" && url) {
      const link = el("a", "attach-image-link");
      link.href = url;
      link.target = "_blank";
      link.rel = "noopener";
      const picture = el("img", "attach-picture");
      picture.src = url;
      picture.alt = file.name;
      picture.loading = "lazy";
      link.append(picture);
      entry.append(link);
    } else if (url) {
      const link = el("a", "attach-name", file.name);
      link.href = `${url}?download=true`;
      link.setAttribute("download", file.name);
      entry.append(link);
    } else {
      entry.append(el("span", "attach-name", file.name));
    }
    entry.append(el("span", "attach-size", sizeText(file.size)));
    list.append(entry);
  }
  const body = item.querySelector(".body");
  if (body) body.after(list);
  else item.append(list);
}

// -- export from the More menu (W15) ----------------------------------------------------------------------
function download(format) {
  const conversation = shared.current;
  if (!conversation) {
    setStatus("Open a conversation to export it.");
    return;
  }
  const link = el("a");
  link.href = `/api/conversations/${conversation.id}/export?format=${format}`;
  link.setAttribute("download", "");
  document.body.append(link);
  link.click();
  link.remove();
  // The download is under way: More folds, and the keyboard goes back to its button.
  const toggle = $("chat-more-toggle");
  if (toggle?.getAttribute("aria-expanded") === "true") {
    toggle.click();
    toggle.focus();
  }
  setStatus(format === "md" ? "The conversation is downloading as Markdown."
    : "The conversation is downloading as JSON (import it again from Tools).", "success");
}

const actions = document.querySelector("#chat-more .chat-actions") || document.querySelector(".chat-actions");
if (actions) {
  const markdown = el("button", "quiet export-markdown", "Export as Markdown");
  markdown.type = "button";
  markdown.id = "export-markdown";
  markdown.addEventListener("click", () => download("md"));
  const json = el("button", "quiet export-json", "Export as JSON");
  json.type = "button";
  json.id = "export-json";
  json.addEventListener("click", () => download("json"));
  const trash = $("trash-conversation");
  if (trash && trash.parentElement === actions) trash.before(markdown, json);
  else actions.append(markdown, json);
}
