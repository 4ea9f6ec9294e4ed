// Personas panel (W3): list, create, edit every field of C1 and G6, upload an avatar, archive and
// restore. A save rebuilds the stored prompts of that persona's conversations (P5).

import { $, apiJson, button, el, say } from "./api.js";
import { avatarFor, avatarUrl } from "./avatars.js";
import { shared } from "./shared.js";

const ui = {
  status: $("personas-status"),
  list: $("persona-list"),
  showArchived: $("persona-show-archived"),
  create: $("persona-new"),
  form: $("persona-form"),
  heading: $("persona-form-heading"),
  avatarSlot: $("persona-avatar-slot"),
  avatarFile: $("persona-avatar-file"),
  name: $("persona-name"),
  display: $("persona-display"),
  identity: $("persona-identity"),
  userLabel: $("persona-user-label"),
  assistantLabel: $("persona-assistant-label"),
  legacy: $("persona-legacy"),
  tone: $("persona-tone"),
  instructions: $("persona-instructions"),
  auto: $("persona-auto"),
  archiveAccess: $("persona-archive-access"),
  web: $("persona-web"),
  archive: $("persona-archive"),
};

let personas = [];
let editing = null; // the persona in the form; null while creating one

export async function showPersonas() {
  showProfile();
  personas = await apiJson("GET", "/api/personas?include_archived=true");
  shared.personas = personas;
  render();
  if (!editing && personas.length) edit(personas.find((p) => !p.archived_at) || personas[0], false);
}

function render() {
  ui.list.replaceChildren();
  for (const p of personas) {
    if (p.archived_at && !ui.showArchived.checked) continue;
    const item = el("li");
    const pick = button(p.display_name, () => edit(p, true), "persona-pick");
    pick.prepend(avatarFor(p));
    if (editing && editing.id === p.id) pick.setAttribute("aria-current", "true");
    pick.append(el("span", "persona-name-tag", ` ${p.name}`));
    if (p.archived_at) pick.append(el("span", "badge", "Archived"));
    item.append(pick);
    ui.list.append(item);
  }
}

function edit(p, focus) {
  editing = p;
  ui.form.hidden = false;
  ui.heading.textContent = p ? `Edit ${p.display_name}` : "New persona";
  ui.name.value = p ? p.name : "";
  ui.name.readOnly = Boolean(p); // the short name is the persona's key (CLI, clients)
  ui.display.value = p ? p.display_name : "";
  ui.identity.value = p ? p.identity : "";
  ui.userLabel.value = p ? p.user_label : "";
  ui.assistantLabel.value = p ? p.assistant_label : "";
  ui.legacy.value = p ? p.legacy_labels.join("\n") : "";
  ui.tone.value = p ? p.tone : "Natural";
  ui.instructions.value = p ? p.custom_instructions : "";
  ui.auto.checked = p ? p.auto_continuity : true;
  ui.archiveAccess.checked = p ? p.archive_access : false;
  ui.web.checked = p ? p.web_search : false;
  ui.archive.hidden = !p;
  ui.archive.textContent = p && p.archived_at ? "Restore" : "Archive";
  ui.avatarFile.value = "";
  showAvatar(p);
  render();
  if (focus) (p ? ui.display : ui.name).focus();
}

// The avatar is an image element only while there is one to show; else the name's initial. Its URL
// carries the avatar's version, so a new upload is a new URL and the old one may stay cached.
function showAvatar(p) {
  ui.avatarSlot.replaceChildren();
  if (!p) return;
  if (!p.avatar_version) {
    ui.avatarSlot.append(avatarFor(p, { size: "large" }));
    return;
  }
  const image = el("img", "avatar");
  image.id = "persona-avatar";
  image.width = 72;
  image.height = 72;
  image.alt = `Avatar of ${p.display_name}`;
  image.addEventListener("error", () => image.remove());
  image.src = avatarUrl(p);
  ui.avatarSlot.append(image);
}

function values() {
  return {
    display_name: ui.display.value.trim(), identity: ui.identity.value, user_label: ui.userLabel.value.trim() || "User said:",
    assistant_label: ui.assistantLabel.value.trim() || `${ui.display.value.trim()} said:`,
    legacy_labels: ui.legacy.value.split("\n").map((s) => s.trim()).filter(Boolean),
    tone: ui.tone.value.trim() || "Natural", custom_instructions: ui.instructions.value,
    auto_continuity: ui.auto.checked, archive_access: ui.archiveAccess.checked, web_search: ui.web.checked,
  };
}

async function uploadAvatar(id) {
  const file = ui.avatarFile.files[0];
  if (!file) return;
  if (file.size > 900_000) throw new Error("The avatar is larger than 900 kB.");
  const response = await fetch(`/api/personas/${id}/avatar`, {
    method: "PUT", body: file, credentials: "same-origin",
    headers: { "Content-Type": file.type || "application/octet-stream",
      "X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content },
  });
  if (!response.ok) {
    let detail = `Upload failed (${response.status})`;
    try {
      detail = (await response.json()).detail || detail;
    } catch (_) {
      // not JSON
    }
    throw new Error(`The avatar was not saved: ${detail}`);
  }
}

ui.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  say(ui.status, "Saving…");
  try {
    let saved;
    let note = "";
    if (editing) {
      const result = await apiJson("PATCH", `/api/personas/${editing.id}`, values());
      saved = result.persona;
      if (result.prompts_rebuilt) note = ` ${result.prompts_rebuilt} stored prompts rebuilt.`;
    } else {
      saved = await apiJson("POST", "/api/personas", { name: ui.name.value.trim(), ...values() });
    }
    await uploadAvatar(saved.id);
    personas = await apiJson("GET", "/api/personas?include_archived=true");
    shared.personas = personas;
    edit(personas.find((p) => p.id === saved.id), false);
    say(ui.status, `Saved ${saved.display_name}.${note}`, "success");
  } catch (error) {
    say(ui.status, error.message, "error");
  }
});

ui.archive.addEventListener("click", async () => {
  if (!editing) return;
  const archived = !editing.archived_at;
  try {
    const saved = await apiJson("POST", `/api/personas/${editing.id}/archive`, { archived });
    personas = personas.map((p) => (p.id === saved.id ? saved : p));
    shared.personas = personas;
    if (archived) ui.showArchived.checked = true;
    edit(saved, false);
    ui.archive.focus();
    say(ui.status, archived ? `${saved.display_name} is archived: its conversations stay; it leaves New Chat.`
      : `${saved.display_name} is back.`, "success");
  } catch (error) {
    say(ui.status, error.message, "error");
  }
});

ui.create.addEventListener("click", () => edit(null, true));
ui.showArchived.addEventListener("change", render);

// What companions call you ({{user}} in character cards, X3): PATCH /api/auth/me.
const profile = { form: $("profile-form"), name: $("profile-name") };

async function showProfile() {
  try {
    profile.name.value = (await apiJson("GET", "/api/auth/me")).display_name || "";
  } catch (error) {
    say(ui.status, error.message, "error");
  }
}

profile.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    const me = await apiJson("PATCH", "/api/auth/me", { display_name: profile.name.value });
    profile.name.value = me.display_name || "";
    say(ui.status, me.display_name ? `Companions call you ${me.display_name}.` : "Companions say “the person” again.",
      "success");
  } catch (error) {
    say(ui.status, error.message, "error");
  }
});
