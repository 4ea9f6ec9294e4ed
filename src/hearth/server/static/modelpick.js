// The chat header's model picker (W3): which model the open conversation's requests ask for. It sits
// with the conversation actions (behind More on a phone) and is shown only when the provider offers
// more than one model. The list (GET /api/models) is read when a conversation first opens and again
// when the picker is focused a minute later; the server keeps it briefly too, and never reads it
// while sending. Choosing saves at once (PUT .../model); the conversation's chain restarts.

import { $, apiJson, el } from "./api.js";
import { setStatus, shared } from "./shared.js";

const STALE_MS = 60_000;
const state = shared;

const label = el("label", "visually-hidden", "Model for this conversation");
const select = el("select", "compact model-select");
select.id = "model-select";
label.htmlFor = select.id;
select.title = "The model this conversation's replies come from";
select.hidden = true;
label.hidden = true;
// First among the actions: what a reply is written by, before what is done with the thread.
$("rename-conversation").before(label, select);

let offered = null; // the last GET /api/models answer
let readAt = 0;
let reading = null;
let drawn = "";

async function readModels(force = false) {
  if (reading) return reading;
  if (offered && !force && Date.now() - readAt < STALE_MS) return offered;
  reading = apiJson("GET", "/api/models").then((answer) => {
    offered = answer;
    readAt = Date.now();
    return answer;
  }).finally(() => {
    reading = null;
  });
  return reading;
}

function option(value, text) {
  const node = el("option", "", text);
  node.value = value;
  return node;
}

function draw() {
  const c = state.current;
  const models = offered ? offered.models : [];
  const show = Boolean(c) && models.length > 1;
  const open = Boolean(c) && c.state !== "ended" && c.visibility !== "trashed" && !c.imported;
  const key = JSON.stringify([c && c.id, c && c.model, models, show, open, state.sending]);
  if (key === drawn) return;
  drawn = key;
  select.hidden = label.hidden = !show;
  if (!show) return;
  select.disabled = !open || state.sending;
  const choices = [option("", `${offered.default} (default)`)];
  for (const name of models) if (name !== offered.default) choices.push(option(name, name));
  // A name saved while the list could not be read, or no longer listed: shown as it is.
  if (c.model && c.model !== offered.default && !models.includes(c.model)) choices.push(option(c.model, c.model));
  select.replaceChildren(...choices);
  select.value = c.model && c.model !== offered.default ? c.model : "";
}

// Called by the chat header each time it is drawn (chat.js).
export function renderModelPicker() {
  draw();
  if (state.current && !offered && !reading) {
    readModels().then(draw).catch(() => {}); // no list: no picker; the thread works as before
  }
}

select.addEventListener("focus", () => {
  if (Date.now() - readAt >= STALE_MS) readModels(true).then(draw).catch(() => {});
});

select.addEventListener("change", async () => {
  const c = state.current;
  if (!c) return;
  const model = select.value || null;
  select.disabled = true;
  try {
    const answer = await apiJson("PUT", `/api/conversations/${c.id}/model`, { model });
    if (state.current && state.current.id === c.id) state.current = answer.conversation;
    const name = model || `${offered.default} (the default)`;
    setStatus(answer.note ? `Replies now come from ${name}. ${answer.note}` : `Replies now come from ${name}.`);
  } catch (error) {
    setStatus(error.message, "error");
  } finally {
    drawn = "";
    draw();
  }
});
