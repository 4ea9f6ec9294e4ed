// The composer and streamed replies: sending a message, reading the server-sent events of the reply
// as they arrive, and Try again after a failed reply (PR5).

import { $, api, button, el } from "./api.js";
import { setStatus, shared } from "./shared.js";
import { addMessage } from "./messages.js";
import { renderSize } from "./sidepanel.js";
import { renderMarkdown } from "./markdown.js";
import { refreshCurrent, renderHeader } from "./chat.js";

const ui = {
  composer: $("composer"),
  text: $("composer-text"),
};

const state = shared;

// Reads server-sent events from a fetch response and calls onEvent(type, data) for each frame.
async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let type = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) type = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent(type, JSON.parse(data.join("\n")));
    }
  }
}

async function streamReply(path, body, userBubble) {
  const conversation = state.current;
  const reply = addMessage({ role: "assistant", kind: "chat", content: "" }, conversation.persona_id);
  reply.classList.add("streaming");
  reply.setAttribute("aria-busy", "true");
  const replyBody = reply.querySelector(".body");
  let response;
  try {
    response = await api("POST", path, body);
  } catch (error) {
    reply.remove();
    throw error;
  }
  let failed = false;
  let text = "";
  let frame = 0;
  // Markdown is rendered while the reply streams, at most once per animation frame, so a fast stream
  // never makes typing in the composer wait.
  const paint = () => {
    frame = 0;
    if (failed) return;
    renderMarkdown(replyBody, text);
    reply.scrollIntoView({ block: "end" });
  };
  await readEvents(response, (type, data) => {
    if (type === "saved" && userBubble) {
      userBubble.classList.remove("pending");
    } else if (type === "diagnostics") {
      renderSize(data);
    } else if (type === "delta") {
      text += data.text;
      if (!frame) frame = requestAnimationFrame(paint);
    } else if (type === "tool") {
      setStatus(data.status === "running" ? `Using ${data.name}…` : `${data.name} finished.`);
    } else if (type === "done") {
      setStatus("");
    } else if (type === "error") {
      failed = true;
      showReplyError(reply, data);
    }
  });
  if (frame) cancelAnimationFrame(frame);
  if (!failed) {
    if (text) paint();
    else replyBody.textContent = "(empty reply)";
  }
  reply.classList.remove("streaming");
  reply.removeAttribute("aria-busy");
}

function showReplyError(reply, data) {
  reply.classList.add("failed");
  reply.querySelector(".body").textContent = "";
  const note = el("p", "error", `The reply failed: ${data.detail}`);
  note.setAttribute("role", "alert");
  reply.append(note);
  if (data.retryable !== false) {
    reply.append(button("Try again", () => {
      reply.remove();
      runSend(() => streamReply(`/api/conversations/${state.current.id}/retry`, {}, null));
    }));
  }
}

async function runSend(work) {
  state.sending = true;
  renderHeader();
  try {
    await work();
  } catch (error) {
    setStatus(error.message, "error");
  } finally {
    state.sending = false;
    renderHeader();
    if (state.current) {
      try {
        await refreshCurrent();
      } catch (error) {
        setStatus(error.message, "error");
      }
    }
    if (!ui.text.disabled) ui.text.focus();
  }
}

async function sendMessage() {
  const text = ui.text.value;
  if (!text.trim() || !state.current || state.sending) return;
  setStatus("");
  const userBubble = addMessage({ role: "user", kind: "chat", content: text });
  userBubble.classList.add("pending");
  await runSend(async () => {
    try {
      await streamReply(`/api/conversations/${state.current.id}/messages`, { text }, userBubble);
      ui.text.value = "";
    } catch (error) {
      userBubble.remove(); // nothing was saved: keep the text in the box
      throw error;
    }
  });
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  sendMessage();
});

ui.text.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    sendMessage();
  }
});
