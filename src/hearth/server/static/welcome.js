// The first-run welcome (U1, W3, W10). On a fresh deployment (GET /api/onboarding: no conversation,
// and no persona but the untouched default) the chat shows three steps instead of an empty thread:
//   1. the person's name (PATCH /api/auth/me: their {{user}} in cards and the label on their messages);
//   2. a companion: *Create a companion* (a name and who they are) or *Import a character card* (the
//      import path of the Tools panel, a card only), then POST /api/onboarding, which makes it the
//      person's own (the unused default is archived);
//   3. the model connection (settings.js's form: provider, key or address, a model from the
//      provider's own list, a live test, or Offline as an explicit choice);
// and then a New Chat with the companion opens, ready for the first real reply. The thread list and
// its New Chat stay usable meanwhile; the welcome leaves as soon as a thread opens.

import { $, apiJson, el, field, focusAfter, say } from "./api.js";
import { shared } from "./shared.js";
import { loadConversations, loadPersonas } from "./threads.js";
import { selectConversation } from "./chat.js";
import { connectionForm, loadMe, saveName } from "./settings.js";

const csrfMeta = document.querySelector('meta[name="csrf-token"]');
const csrfToken = csrfMeta ? csrfMeta.content : "";
const state = shared;
const chat = document.querySelector("section.chat");

const panel = el("section", "welcome");
panel.id = "welcome";
panel.hidden = true;
panel.setAttribute("aria-labelledby", "welcome-heading");
const heading = el("h1", "", "Welcome to Hearth");
heading.id = "welcome-heading";
heading.tabIndex = -1;
const lede = el("p", "lede", "Hearth keeps one continuous relationship with a companion, across every conversation. "
  + "Three short steps and you are talking.");
const progress = el("p", "welcome-progress muted small");

// Step 1: the person's name.
const nameForm = el("form", "card welcome-step welcome-name");
nameForm.id = "welcome-name";
nameForm.noValidate = true; // our own message, said in the status line
nameForm.setAttribute("aria-labelledby", "welcome-name-heading");
const nameHeading = el("h2", "", "What should your companion call you?");
nameHeading.id = "welcome-name-heading";
const yourName = field("Your name", "text", { maxLength: 100, required: true, placeholder: "Sam" });
yourName.input.autocomplete = "given-name";
const nameButton = el("button", "primary", "Continue");
nameButton.type = "submit";
nameForm.append(nameHeading, el("p", "muted small", "Companions use it when they talk to you; you can change it in Settings."),
  yourName.wrap, nameButton);

// Step 3: the model connection.
const connectStep = el("section", "card welcome-step welcome-connect");
connectStep.id = "welcome-connect";
connectStep.setAttribute("aria-labelledby", "welcome-connect-heading");
const connectHeading = el("h2", "", "Connect a model");
connectHeading.id = "welcome-connect-heading";
const connectNote = el("p", "muted small", "Choose where your companion's replies come from. "
  + "You can change this any time in Settings.");
let chosenPersona = null;
const connection = connectionForm({
  submitLabel: "Save and start chatting",
  onSaved: async () => {
    if (chosenPersona) await begin(chosenPersona);
  },
});
connectStep.append(connectHeading, connectNote, connection.node);

// Create a companion.
const create = el("form", "card welcome-choice");
create.id = "welcome-create";
create.setAttribute("aria-labelledby", "welcome-create-heading");
const createHeading = el("h2", "", "Create a companion");
createHeading.id = "welcome-create-heading";
const name = field("Name", "text", { maxLength: 200, required: true, placeholder: "Juniper" });
name.input.autocomplete = "off";
const identity = field("Who they are (a sentence or two)", "textarea", {
  rows: 3, maxLength: 2000, placeholder: "A calm, curious friend who likes long walks and remembers the small things.",
});
const createButton = el("button", "primary", "Create and continue");
createButton.type = "submit";
create.append(createHeading, name.wrap, identity.wrap, createButton);

// Import a character card.
const upload = el("form", "card welcome-choice");
upload.id = "welcome-import";
upload.setAttribute("aria-labelledby", "welcome-import-heading");
const uploadHeading = el("h2", "", "Import a character card");
uploadHeading.id = "welcome-import-heading";
const uploadNote = el("p", "muted small", "A character card from SillyTavern or another client (PNG or JSON). "
  + "Its greeting opens your first conversation.");
const file = field("Card file", "file");
file.input.accept = ".png,.json,image/png,application/json";
const uploadButton = el("button", "", "Import and continue");
uploadButton.type = "submit";
upload.append(uploadHeading, uploadNote, file.wrap, uploadButton);

const choices = el("div", "welcome-choices welcome-step");
choices.append(create, upload);
const status = el("p", "status");
status.id = "welcome-status";
status.setAttribute("role", "status");
status.setAttribute("aria-live", "polite");
panel.append(heading, lede, progress, nameForm, choices, connectStep, status);
chat.prepend(panel);

function setShown(show) {
  panel.hidden = !show;
  chat.classList.toggle("welcoming", show);
}

const STEPS = [nameForm, choices, connectStep];

function step(index) {
  STEPS.forEach((node, i) => { node.hidden = i !== index; });
  progress.textContent = `Step ${index + 1} of ${STEPS.length}`;
  say(status, "");
}

async function startSteps() {
  const me = await loadMe().catch(() => null);
  yourName.input.value = (me && me.display_name) || "";
  step(0);
}

nameForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!yourName.input.value.trim()) {
    say(status, "Write the name you would like to be called.", "error");
    yourName.input.focus();
    return;
  }
  nameButton.disabled = true;
  try {
    await saveName(yourName.input.value);
    step(1);
    name.input.focus();
  } catch (error) {
    say(status, error.message, "error");
  } finally {
    nameButton.disabled = false;
  }
});

// The companion exists: the last step connects a model, then the chat opens.
async function connectNext(persona) {
  chosenPersona = persona;
  step(2);
  await connection.load();
  connectHeading.tabIndex = -1;
  connectHeading.focus();
}

// Asked whenever the chat is shown with no conversation open (app.js).
export async function showWelcome() {
  if (state.current) return;
  const answer = await apiJson("GET", "/api/onboarding");
  const show = answer.show && !state.current;
  const was = !panel.hidden;
  if (show && !was) await startSteps();
  setShown(show);
  if (show && !was && document.activeElement === document.body) heading.focus();
}

// A thread opened (from the welcome or the thread list): the welcome has done its work.
new MutationObserver(() => {
  if (!panel.hidden && state.current) setShown(false);
}).observe($("chat-title"), { childList: true, characterData: true, subtree: true });

async function begin(persona) {
  await loadPersonas();
  const result = await apiJson("POST", "/api/conversations/new-chat", { persona_id: persona.id, continue: false });
  await loadConversations();
  setShown(false);
  await selectConversation(result.conversation.id);
}

function busy(on) {
  for (const node of panel.querySelectorAll("button, input, textarea")) node.disabled = on;
}

create.addEventListener("submit", async (event) => {
  event.preventDefault();
  const from = document.activeElement;
  busy(true);
  say(status, "Creating your companion…");
  try {
    const done = await apiJson("POST", "/api/onboarding", { name: name.input.value, identity: identity.input.value });
    say(status, "");
    await connectNext(done.persona);
  } catch (error) {
    say(status, error.message, "error");
    busy(false);
    focusAfter(name.input, from);
  } finally {
    busy(false);
  }
});

async function importCard(chosen) {
  const params = new URLSearchParams({ name: chosen.name, format: "card" });
  let response;
  try {
    response = await fetch(`/api/imports?${params}`, {
      method: "POST", body: chosen, credentials: "same-origin",
      headers: { "X-CSRF-Token": csrfToken, Accept: "application/json" },
    });
  } catch (_) {
    throw new Error("The server could not be reached.");
  }
  const report = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(report.detail || `The import failed (${response.status}).`);
  const ids = (report.ids && report.ids.personas) || [];
  if (!ids.length) throw new Error("That file holds no character.");
  return ids[0];
}

upload.addEventListener("submit", async (event) => {
  event.preventDefault();
  const chosen = file.input.files[0];
  if (!chosen) {
    say(status, "Choose a card file first.", "error");
    file.input.focus();
    return;
  }
  const from = document.activeElement;
  busy(true);
  say(status, `Importing ${chosen.name}…`);
  try {
    const personaId = await importCard(chosen);
    const done = await apiJson("POST", "/api/onboarding", { persona_id: personaId });
    say(status, "");
    await connectNext(done.persona);
  } catch (error) {
    say(status, error.message, "error");
    busy(false);
    focusAfter(file.input, from);
  } finally {
    busy(false);
  }
});
