// Read aloud: a message spoken by the browser's own speech synthesis (window.speechSynthesis), so
// nothing leaves the device. A companion's replies are read in the voice chosen for its persona;
// the choice is kept in this browser's localStorage as hearth.voice.<persona id> (a voice is a
// property of the device, and the same persona may want another voice on the phone). Your own
// messages are read in the browser's default voice. While a message is read, its button says
// "Stop reading"; Escape stops it too.

import { $, el } from "./api.js";
import { personaName } from "./shared.js";
import { setIcon } from "./icons.js";

const voiceKey = (personaId) => `hearth.voice.${personaId}`;
let speaking = null; // { item, utterance }

export const speechAvailable = () => Boolean(window.speechSynthesis) && typeof window.SpeechSynthesisUtterance === "function";

function label(button, on) {
  setIcon(button, on ? "stop" : "speak", on ? "Stop reading" : "Read aloud");
}

function refresh(item) {
  const button = item?.querySelector(".read-aloud");
  if (button) label(button, speaking?.item === item);
}

export function stopReading() {
  if (!speaking) return;
  const { item } = speaking;
  speaking = null;
  window.speechSynthesis.cancel();
  refresh(item);
}

function storedVoice(personaId) {
  if (personaId == null) return null;
  let uri = null;
  try {
    uri = window.localStorage.getItem(voiceKey(personaId));
  } catch (error) {
    return null; // storage refused: the default voice
  }
  return uri ? window.speechSynthesis.getVoices().find((v) => v.voiceURI === uri) || null : null;
}

function speak(item, text, personaId) {
  stopReading();
  const utterance = new window.SpeechSynthesisUtterance(text);
  const voice = storedVoice(personaId);
  if (voice) {
    utterance.voice = voice;
    utterance.lang = voice.lang;
  }
  const done = () => {
    if (speaking?.utterance !== utterance) return; // a later reading took over
    speaking = null;
    refresh(item);
  };
  utterance.addEventListener("end", done);
  utterance.addEventListener("error", done);
  speaking = { item, utterance };
  refresh(item);
  window.speechSynthesis.speak(utterance);
}

// The "Read aloud" / "Stop reading" button of one message. text() gives its plain text at the time
// of the click; personaId() the persona whose voice reads it (null: the default voice).
export function readButton(item, text, personaId) {
  const button = el("button", "quiet small read-aloud");
  button.type = "button";
  label(button, speaking?.item === item);
  button.addEventListener("click", () => {
    if (speaking?.item === item) stopReading();
    else speak(item, text(), personaId());
  });
  return button;
}

document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && speaking) stopReading();
});

// The voice picker in the chat's side panel: the voices of this browser, for the open thread's persona.
let picker = null;
let pickerPersona = null;

function buildPicker() {
  const section = el("section", "side-card voice-choice");
  section.setAttribute("aria-labelledby", "voice-heading");
  const heading = el("h2", "", "Reading aloud");
  heading.id = "voice-heading";
  const fieldLabel = el("label", "", "Voice");
  fieldLabel.htmlFor = "voice-select";
  const select = el("select");
  select.id = "voice-select";
  const note = el("p", "muted small", "");
  section.append(heading, fieldLabel, select, note);
  select.addEventListener("change", () => {
    if (pickerPersona == null) return;
    try {
      if (select.value) window.localStorage.setItem(voiceKey(pickerPersona), select.value);
      else window.localStorage.removeItem(voiceKey(pickerPersona));
    } catch (error) {
      note.textContent = "This browser refused to keep the choice.";
    }
  });
  window.speechSynthesis.addEventListener?.("voiceschanged", () => fillPicker());
  $("details").append(section);
  return { section, fieldLabel, select, note };
}

function fillPicker() {
  const { fieldLabel, select, note, section } = picker;
  section.hidden = pickerPersona == null;
  if (pickerPersona == null) return;
  const name = personaName(pickerPersona);
  fieldLabel.textContent = `Voice for ${name}`;
  const voices = window.speechSynthesis.getVoices();
  const chosen = storedVoice(pickerPersona);
  const none = el("option", "", "Browser default");
  none.value = "";
  const options = voices.map((v) => {
    const option = el("option", "", `${v.name} (${v.lang})`);
    option.value = v.voiceURI;
    return option;
  });
  select.replaceChildren(none, ...options);
  select.value = chosen ? chosen.voiceURI : "";
  note.textContent = voices.length
    ? `${name}'s replies are read in this voice, in this browser.`
    : "This browser offers only its default voice.";
}

// Called when the open conversation changes (chat.js): the picker follows its persona.
export function showVoiceChoice(personaId) {
  if (!speechAvailable()) return;
  if (!picker) picker = buildPicker();
  if (picker.select.options.length && pickerPersona === (personaId ?? null)) return; // as it is
  pickerPersona = personaId ?? null;
  fillPicker();
}
