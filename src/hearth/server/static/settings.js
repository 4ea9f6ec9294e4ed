// Settings (W10): the person's name (what companions call them, {{user}} in cards, and the label on
// their messages) and the model connection: where replies come from (OpenAI, Anthropic, any
// OpenAI-compatible server such as Ollama, or offline), its key or address, a model from the
// provider's own list, and a live test. Saving takes effect on the next message, no restart.
// The welcome (welcome.js) uses the same connection form as its last step.
//
// A saved key is never sent back to the page: the form shows its hint ("sk-…abcd") and an empty key
// box keeps it. When the server's environment chooses the provider, the page says so.

import { apiJson, el, field, say } from "./api.js";
import { loadMe, saveName } from "./profile.js";

const PROVIDERS = [
  ["openai", "OpenAI", "GPT models, with your OpenAI API key."],
  ["anthropic", "Anthropic", "Claude models, with your Anthropic API key."],
  ["openai-chat", "Another server", "Ollama, LM Studio, OpenRouter or any OpenAI-compatible address."],
  ["offline", "Offline for now", "No model: Hearth answers with a simple built-in reply, and nothing leaves this computer."],
];
const NAMES = Object.fromEntries(PROVIDERS.map(([value, label]) => [value, label]));
const SOURCES = {
  own: "your saved connection",
  owner: "the household connection the owner saved",
  none: "nothing yet: replies are offline",
};
let radioGroup = 0;

// The person's name and who they are live in profile.js (read as the page starts); the welcome and
// the Accounts page take them from here with the rest of this page's helpers.
export { loadMe, saveName };

// One line saying which provider answers now and why.
export function describe(state) {
  const name = NAMES[state.provider] || state.provider;
  const model = state.provider === "offline" ? "" : ` (${state.model})`;
  if (state.source === "environment") {
    return `Replies come from ${name}${model}, chosen by this server's settings (${state.environment.join(", ")}). `
      + "Those win over anything saved here; what you save is used once they are removed.";
  }
  if (state.source === "none") return "No model is connected yet: replies are offline.";
  return `Replies come from ${name}${model}: ${SOURCES[state.source]}.`;
}

// The connection form: returns {node, load()}; onSaved(state) runs after a successful save.
export function connectionForm({ submitLabel = "Save connection", onSaved } = {}) {
  radioGroup += 1;
  const group = `provider-${radioGroup}`;
  const form = el("form", "connect-form");
  form.noValidate = true;
  const summary = el("p", "connect-summary");
  summary.setAttribute("role", "status");

  const choices = el("fieldset", "connect-providers");
  choices.append(el("legend", "", "Where replies come from"));
  const radios = {};
  for (const [value, label, hint] of PROVIDERS) {
    const id = `${group}-${value}`;
    const option = el("div", "connect-provider");
    const input = el("input");
    input.type = "radio";
    input.name = group;
    input.value = value;
    input.id = id;
    const text = el("label", "");
    text.htmlFor = id;
    text.append(el("strong", "", label), el("span", "muted small", hint));
    option.append(input, text);
    choices.append(option);
    radios[value] = input;
  }

  const key = field("API key", "password", { maxLength: 1000 });
  key.input.autocomplete = "off";
  key.input.spellcheck = false;
  const keyNote = el("p", "muted small connect-note");
  keyNote.id = `${group}-key-note`;
  key.input.setAttribute("aria-describedby", keyNote.id);
  key.wrap.append(keyNote);

  const address = field("Server address", "url", { maxLength: 2000, placeholder: "http://localhost:11434/v1" });
  address.input.autocomplete = "off";
  const addressNote = el("p", "muted small connect-note",
    "Ollama: http://localhost:11434/v1 · LM Studio: http://localhost:1234/v1");
  address.wrap.append(addressNote);

  const modelRow = el("div", "connect-model");
  const model = field("Model", "select", { choices: [["", "Choose “Show models” first"]] });
  const listButton = el("button", "", "Show models");
  listButton.type = "button";
  modelRow.append(model.wrap, listButton);

  const actions = el("div", "connect-actions");
  const testButton = el("button", "", "Test connection");
  testButton.type = "button";
  const saveButton = el("button", "primary", submitLabel);
  saveButton.type = "submit";
  actions.append(testButton, saveButton);
  const status = el("p", "status connect-status");
  status.setAttribute("role", "status");
  status.setAttribute("aria-live", "polite");

  const details = el("div", "connect-details");
  details.append(address.wrap, key.wrap, modelRow);
  form.append(summary, choices, details, actions, status);

  let state = null;
  let listedFor = "";

  const chosen = () => Object.values(radios).find((r) => r.checked)?.value || "offline";
  const saved = () => (state && state.saved) || null;

  function body() {
    const provider = chosen();
    if (provider === "offline") return { provider };
    const out = { provider, model: model.input.value, base_url: address.input.value.trim() };
    if (key.input.value.trim()) out.api_key = key.input.value.trim();
    return out;
  }

  function shape() {
    const provider = chosen();
    const offline = provider === "offline";
    details.hidden = offline;
    key.wrap.hidden = offline;
    address.wrap.hidden = provider !== "openai-chat";
    const mine = saved();
    const keyKept = mine && mine.provider === provider && mine.key_hint;
    key.input.required = (provider === "openai" || provider === "anthropic") && !keyKept;
    key.wrap.querySelector("label").textContent = provider === "openai-chat" ? "API key (if the server needs one)" : "API key";
    keyNote.textContent = keyKept
      ? `A key is saved (${mine.key_hint}). Leave this empty to keep it.`
      : "Stored on this Hearth server only; it is never shown again in full.";
    saveButton.textContent = offline && submitLabel === "Save connection" ? "Use offline" : submitLabel;
  }

  function fillModels(names, keep) {
    model.input.replaceChildren();
    if (!names.length) {
      const none = el("option", "", "No models found");
      none.value = "";
      model.input.append(none);
      return;
    }
    for (const name of names) {
      const option = el("option", "", name);
      option.value = name;
      model.input.append(option);
    }
    if (keep && names.includes(keep)) model.input.value = keep;
  }

  async function listModels() {
    const wanted = body();
    if (wanted.provider === "offline") return;
    say(status, "Asking the provider for its models…");
    listButton.disabled = true;
    try {
      const answer = await apiJson("POST", "/api/connection/models", { ...wanted, model: "" });
      if (answer.ok) {
        const keep = model.input.value || (saved() && saved().model) || "";
        fillModels(answer.models, keep);
        listedFor = `${wanted.provider} ${wanted.base_url}`;
        say(status, `${answer.models.length} ${answer.models.length === 1 ? "model" : "models"} found. Choose one.`, "success");
      } else {
        say(status, `The models could not be listed: ${answer.detail}`, "error");
      }
    } catch (error) {
      say(status, error.message, "error");
    } finally {
      listButton.disabled = false;
    }
  }

  async function test() {
    const wanted = body();
    if (wanted.provider === "offline") {
      say(status, "Offline needs no test: replies come from Hearth itself.", "success");
      return;
    }
    if (!wanted.model) {
      say(status, "Choose a model first (Show models).", "error");
      return;
    }
    say(status, "Sending one short message to the model…");
    testButton.disabled = true;
    try {
      const tried = await apiJson("POST", "/api/connection/test", wanted);
      if (tried.ok) {
        const words = tried.reply ? ` It said: “${tried.reply}”` : "";
        say(status, `It works: ${tried.model} answered in ${tried.seconds.toFixed(1)} s.${words}`, "success");
      } else {
        say(status, `It did not work: ${tried.detail}`, "error");
      }
    } catch (error) {
      say(status, error.message, "error");
    } finally {
      testButton.disabled = false;
    }
  }

  for (const radio of Object.values(radios)) {
    radio.addEventListener("change", () => {
      shape();
      model.input.replaceChildren(el("option", "", "Choose “Show models” first"));
      model.input.firstChild.value = "";
      listedFor = "";
      say(status, "");
    });
  }
  address.input.addEventListener("change", () => { listedFor = ""; });
  listButton.addEventListener("click", listModels);
  testButton.addEventListener("click", test);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const wanted = body();
    if (wanted.provider !== "offline" && !wanted.model) {
      say(status, "Choose a model first (Show models).", "error");
      model.input.focus();
      return;
    }
    saveButton.disabled = true;
    say(status, "Saving…");
    try {
      state = await apiJson("PUT", "/api/connection", wanted);
      key.input.value = "";
      summary.textContent = describe(state);
      shape();
      say(status, wanted.provider === "offline" ? "Saved: replies are offline." : "Saved. Your next message uses it.", "success");
      if (onSaved) await onSaved(state);
    } catch (error) {
      say(status, error.message, "error");
    } finally {
      saveButton.disabled = false;
    }
  });

  async function load() {
    state = await apiJson("GET", "/api/connection");
    summary.textContent = describe(state);
    const mine = state.saved;
    const start = mine ? mine.provider : (state.source === "none" ? "openai" : state.provider);
    (radios[start] || radios.openai).checked = true;
    key.input.value = "";
    address.input.value = mine ? mine.base_url : "";
    if (mine && mine.model) fillModels([mine.model], mine.model);
    else fillModels([], "");
    if (!mine || !mine.model) model.input.firstChild.textContent = "Choose “Show models” first";
    listedFor = "";
    shape();
    say(status, "");
    return state;
  }

  return { node: form, load, get listed() { return listedFor; } };
}

// A page of the top bar's (Settings, Accounts): its section, hidden until chosen, the inner column
// and a header whose heading names the page and takes the focus when it opens.
export function pageView(name, title) {
  const view = el("section", `view page ${name}-page`);
  view.id = `view-${name}`;
  view.dataset.view = name;
  view.hidden = true;
  view.setAttribute("aria-labelledby", `${name}-heading`);
  const inner = el("div", "page-inner");
  const header = el("header", "page-header");
  const heading = el("h1", "", title);
  heading.id = `${name}-heading`;
  heading.tabIndex = -1;
  header.append(heading);
  return { view, inner, header };
}

// -- the Settings page ----------------------------------------------------------------------------
const { view, inner, header } = pageView("settings", "Settings");

const nameCard = el("section", "card");
nameCard.setAttribute("aria-labelledby", "settings-name-heading");
const nameHeading = el("h2", "", "Your name");
nameHeading.id = "settings-name-heading";
const nameForm = el("form", "settings-name");
const nameField = field("What your companions call you", "text", { maxLength: 100, placeholder: "Your first name" });
nameField.input.autocomplete = "given-name";
const nameSave = el("button", "", "Save name");
nameSave.type = "submit";
const nameStatus = el("p", "status");
nameStatus.setAttribute("role", "status");
nameForm.append(nameField.wrap, nameSave);
nameCard.append(nameHeading, el("p", "muted small", "Used wherever a character card speaks to you by name, and on your messages."),
  nameForm, nameStatus);

const connectCard = el("section", "card");
connectCard.setAttribute("aria-labelledby", "settings-connect-heading");
const connectHeading = el("h2", "", "Model connection");
connectHeading.id = "settings-connect-heading";
const connection = connectionForm();
const keyNote = el("p", "muted small", "Keys are kept on this Hearth server, in its data folder: keep that folder private to "
  + "you. Each person in a household may connect their own; anyone who has not uses the owner's.");
connectCard.append(connectHeading, connection.node, keyNote);

inner.append(header, nameCard, connectCard);
view.append(inner);
document.getElementById("main").append(view);

nameForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  nameSave.disabled = true;
  try {
    const me = await saveName(nameField.input.value);
    say(nameStatus, me.display_name ? `Saved: your companions call you ${me.display_name}.` : "Cleared.", "success");
  } catch (error) {
    say(nameStatus, error.message, "error");
  } finally {
    nameSave.disabled = false;
  }
});

export async function showSettings() {
  const [me] = await Promise.all([loadMe(), connection.load()]);
  nameField.input.value = me.display_name || "";
  say(nameStatus, "");
}
