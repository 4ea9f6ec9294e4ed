// Voice (E9, W16): the microphone as another channel of the open thread. Audio goes to the server
// over a WebSocket as 24 kHz PCM16; the server relays it to the realtime speech model (the key stays
// there) and sends back the companion's voice and both sides' transcripts, which it also keeps in
// the thread. The Voice button shows only when the server says a realtime session can run
// (GET /api/voice/ability); otherwise the microphone offers dictation through the browser's own
// speech recognition into the message box, where the browser has it, and nothing where it does not.

import { $, apiJson, el } from "./api.js";
import { iconButton, setIcon } from "./icons.js";
import { setStatus, shared } from "./shared.js";
import { selectConversation } from "./chat.js";

const RATE = 24000;
const ui = { start: $("voice-start"), end: $("voice-end"), transcript: $("voice-transcript"), text: $("composer-text") };
let session = null;
let failed = false; // the session ended in an error: no "transcript is in the thread"

function toBase64(int16) {
  const bytes = new Uint8Array(int16.buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function fromBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return new Int16Array(bytes.buffer, 0, bytes.length >> 1);
}

function play(audio) {
  const samples = fromBase64(audio);
  if (!samples.length) return;
  const buffer = session.context.createBuffer(1, samples.length, RATE);
  const channel = buffer.getChannelData(0);
  for (let i = 0; i < samples.length; i++) channel[i] = samples[i] / 0x8000;
  const source = session.context.createBufferSource();
  source.buffer = buffer;
  source.connect(session.context.destination);
  session.playAt = Math.max(session.playAt, session.context.currentTime);
  source.start(session.playAt);
  session.playAt += buffer.duration;
}

function showTranscript(role, text) {
  const line = el("li", `voice-line ${role}`);
  line.append(el("span", "voice-who", role === "user" ? "You" : "Companion"), document.createTextNode(` ${text}`));
  ui.transcript.append(line);
}

function setActive(active) {
  ui.start.hidden = active;
  ui.end.hidden = !active;
  ui.transcript.hidden = !active && !ui.transcript.childElementCount;
}

async function start() {
  const conversation = shared.current;
  if (session) return;
  if (!conversation) {
    setStatus("Open a conversation first: a voice session continues it.", "error");
    return;
  }
  let stream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch {
    setStatus("The microphone is not available.", "error");
    return;
  }
  failed = false;
  const context = new AudioContext({ sampleRate: RATE });
  const scheme = window.location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${window.location.host}/api/voice?persona_id=${conversation.persona_id}`);
  session = { stream, context, socket, playAt: 0, node: null };
  ui.transcript.replaceChildren();
  setActive(true);
  setStatus("Voice: connecting…");
  socket.onmessage = (message) => {
    const event = JSON.parse(message.data);
    if (event.type === "ready") {
      setStatus("Voice: listening.");
      const source = context.createMediaStreamSource(stream);
      // A ScriptProcessor keeps this to one file (an AudioWorklet would need a second module).
      const node = context.createScriptProcessor(4096, 1, 1);
      node.onaudioprocess = (e) => {
        if (socket.readyState !== WebSocket.OPEN) return;
        const input = e.inputBuffer.getChannelData(0);
        const pcm = new Int16Array(input.length);
        for (let i = 0; i < input.length; i++) pcm[i] = Math.max(-1, Math.min(1, input[i])) * 0x7fff;
        socket.send(JSON.stringify({ type: "audio", audio: toBase64(pcm) }));
      };
      source.connect(node);
      node.connect(context.destination);
      session.node = node;
    } else if (event.type === "audio") {
      play(event.audio);
    } else if (event.type === "transcript") {
      showTranscript(event.role, event.text);
    } else if (event.type === "error") {
      failed = true;
      setStatus(`Voice: the speech service reported ${event.code}.`, "error");
    }
  };
  socket.onclose = (event) => {
    if (event.code === 1008) {
      failed = true;
      setStatus(`Voice could not start: ${event.reason || "the server refused the session"}.`, "error");
    }
    finish();
  };
}

function end() {
  if (session && session.socket.readyState === WebSocket.OPEN) session.socket.send(JSON.stringify({ type: "end" }));
  else finish();
}

async function finish() {
  if (!session) return;
  const { stream, context, node } = session;
  session = null;
  if (node) node.disconnect();
  stream.getTracks().forEach((track) => track.stop());
  await context.close();
  const heard = ui.transcript.childElementCount > 0;
  setActive(false);
  if (shared.current) await selectConversation(shared.current.id);  // the spoken turns join the thread
  // Only a session that carried words can say where they went.
  if (heard) setStatus("Voice session ended; its transcript is in the thread.");
  else if (!failed) setStatus("Voice session ended before anything was said.");
}

ui.start.addEventListener("click", start);
ui.end.addEventListener("click", end);

// -- dictation (W16): the browser's own speech recognition, into the message box -------------------
const Recognition = window.SpeechRecognition || window.webkitSpeechRecognition;
let dictation = null; // the running recognition
let dictate = null; // its button

function insertAtCursor(words) {
  const box = ui.text;
  const start = box.selectionStart ?? box.value.length;
  const end = box.selectionEnd ?? box.value.length;
  const before = box.value.slice(0, start);
  const spaced = (before && !/\s$/.test(before) ? " " : "") + words;
  box.setRangeText(spaced, start, end, "end");
  box.dispatchEvent(new Event("input")); // the draft is kept as typed text is
}

function stopDictation() {
  if (dictation) dictation.stop();
}

function startDictation() {
  if (dictation || ui.text.disabled) return;
  const recognition = new Recognition();
  recognition.lang = document.documentElement.lang || navigator.language || "en";
  recognition.interimResults = false;
  recognition.continuous = true;
  recognition.addEventListener("result", (event) => {
    for (let i = event.resultIndex; i < event.results.length; i++) {
      if (event.results[i].isFinal) insertAtCursor(event.results[i][0].transcript.trim());
    }
  });
  recognition.addEventListener("error", (event) => {
    setStatus(event.error === "not-allowed" ? "The microphone is not allowed for this page." : "Dictation stopped.", "error");
  });
  recognition.addEventListener("end", () => {
    dictation = null;
    setIcon(dictate, "mic", "Dictate");
    dictate.setAttribute("aria-pressed", "false");
  });
  dictation = recognition;
  setIcon(dictate, "stop", "Stop dictating");
  dictate.setAttribute("aria-pressed", "true");
  recognition.start();
  ui.text.focus();
}

function offerDictation() {
  if (!Recognition || dictate) return;
  dictate = iconButton("mic", "Dictate", () => (dictation ? stopDictation() : startDictation()), "quiet dictate");
  dictate.id = "dictate";
  dictate.setAttribute("aria-pressed", "false");
  ui.start.before(dictate);
}

// What the microphone offers here: realtime voice when the server can run it, else dictation.
async function offerVoice() {
  ui.start.hidden = true;
  let realtime = false;
  try {
    realtime = (await apiJson("GET", "/api/voice/ability")).realtime;
  } catch {
    realtime = false; // unknown: offer what surely works
  }
  if (realtime) ui.start.hidden = Boolean(session);
  else offerDictation();
}

offerVoice();
