// Voice (E9): the microphone as another channel of the open thread. Audio goes to the server over a
// WebSocket as 24 kHz PCM16; the server relays it to the realtime speech model (the key stays there)
// and sends back the companion's voice and both sides' transcripts, which it also keeps in the thread.

import { $, el } from "./api.js";
import { setStatus, shared } from "./shared.js";
import { selectConversation } from "./chat.js";

const RATE = 24000;
const ui = { start: $("voice-start"), end: $("voice-end"), transcript: $("voice-transcript") };
let session = null;

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
      setStatus(`Voice: the speech service reported ${event.code}.`, "error");
    }
  };
  socket.onclose = () => finish();
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
  setActive(false);
  if (shared.current) await selectConversation(shared.current.id);  // the spoken turns join the thread
  setStatus("Voice session ended; its transcript is in the thread.");
}

ui.start.addEventListener("click", start);
ui.end.addEventListener("click", end);
