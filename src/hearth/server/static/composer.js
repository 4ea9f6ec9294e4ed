// The composer and streamed replies: sending a message, reading the server-sent events of the reply
// as they arrive (Markdown rendered while it streams), Try again after a failed reply (PR5), and the
// turn actions of W2: Stop (what arrived is kept, with Undo: W12), Regenerate, swiping between
// versions and editing a sent message. The box is emptied when a message is sent, never when its
// reply ends, so a draft written while a reply streams stays; Enter waits (the text stays) until
// the reply ends or is stopped.

import { $, api, apiJson, button, el } from "./api.js";
import { setStatus, shared } from "./shared.js";
import { addMessage, connectActions, refreshActions, setMessageData, setSource, updateMessage } from "./messages.js";
import { renderSize } from "./sidepanel.js";
import { markdownFragment, renderMarkdown } from "./markdown.js";
import { refreshCurrent, reloadMessages, renderHeader } from "./chat.js";
import { hasAttachments, takeAttachments } from "./attachments.js";

const ui = {
  composer: $("composer"),
  text: $("composer-text"),
  stop: $("stop"),
};

const state = shared;
let controller = null; // aborts the streaming reply (Stop)

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

// Streams a reply into a new bubble, or into `into` (a reply being regenerated), whose previous
// text comes back if the new one is stopped and not kept.
async function streamReply(path, body, { userBubble = null, into = null } = {}) {
  const conversation = state.current;
  const reply = into || addMessage({ role: "assistant", kind: "chat", content: "" }, conversation.persona_id);
  const replyBody = reply.querySelector(".body");
  const before = into ? [...replyBody.childNodes] : null;
  if (into) replyBody.replaceChildren();
  for (const node of reply.querySelectorAll(".turn-actions, .stopped")) node.remove();
  reply.classList.add("streaming");
  reply.setAttribute("aria-busy", "true");
  controller = new AbortController();
  let response;
  try {
    response = await api("POST", path, body, { signal: controller.signal });
  } catch (error) {
    if (into) replyBody.replaceChildren(...before);
    else reply.remove();
    throw error;
  }
  let failed = false;
  let text = "";
  let frame = 0;
  // Markdown is drawn while the reply streams (see streamingView), at most once per animation frame
  // and so that drawing takes at most a fifth of the time, so a fast stream never makes typing wait.
  const draw = streamingView(replyBody);
  let allowedAt = 0;
  const paint = () => {
    frame = 0;
    if (failed) return;
    const start = performance.now();
    if (start < allowedAt) {
      frame = requestAnimationFrame(paint);
      return;
    }
    draw(text);
    reply.scrollIntoView({ block: "end" });
    allowedAt = performance.now() + 4 * (performance.now() - start);
  };
  const paintAll = () => {
    renderMarkdown(replyBody, text); // the whole text once more: a paragraph drawn alone may read differently
    setSource(reply, text);
    reply.scrollIntoView({ block: "end" });
  };
  let stopped = false;
  try {
    await readEvents(response, (type, data) => {
      if (type === "saved") {
        if (userBubble) {
          userBubble.classList.remove("pending");
          userBubble.dataset.messageId = String(data.message_id);
        }
      } else if (type === "diagnostics") {
        renderSize(data);
      } else if (type === "delta") {
        text += data.text;
        if (!frame) frame = requestAnimationFrame(paint);
      } else if (type === "tool") {
        setStatus(data.status === "running" ? `Using ${data.name}…` : `${data.name} finished.`);
      } else if (type === "done") {
        setStatus("");
        reply.dataset.messageId = String(data.message_id);
        if (userBubble) userBubble.dataset.messageId = String(data.user_message_id);
      } else if (type === "error") {
        failed = true;
        showReplyError(reply, data);
      }
    });
  } catch (error) {
    if (error.name !== "AbortError") throw error;
    stopped = true;
  }
  if (frame) cancelAnimationFrame(frame);
  reply.classList.remove("streaming");
  reply.removeAttribute("aria-busy");
  controller = null;
  if (stopped) {
    await keepStopped(reply, text, before);
    return;
  }
  if (!failed) {
    if (text) paintAll();
    else replyBody.textContent = "(empty reply)";
    if (into) await reloadMessage(reply);
  }
}

// A streaming reply's Markdown: paragraphs that are complete (a blank line outside a code fence) are
// drawn once and stay; only the paragraph still arriving is drawn again, so each frame costs the
// same however long the reply has grown.
function streamingView(body) {
  let frozenAt = 0;
  let tail = [];
  return (text) => {
    const cut = paragraphEnd(text, frozenAt);
    for (const node of tail) node.remove();
    tail = [];
    if (cut > frozenAt) {
      body.append(markdownFragment(text.slice(frozenAt, cut)));
      frozenAt = cut;
    }
    const fragment = markdownFragment(text.slice(frozenAt));
    tail = [...fragment.childNodes];
    body.append(fragment);
  };
}

function paragraphEnd(text, from) {
  const at = text.lastIndexOf("\n\n");
  if (at < from) return from;
  const fences = (text.slice(0, at).match(/^ {0,3}(```|~~~)/gm) || []).length;
  return fences % 2 === 0 ? at + 2 : from;
}

// Stopped (W12): what arrived is kept at once, marked partial, with Undo beside it (Undo removes it
// again, or brings back the earlier version of a regenerated reply). Nothing arrived: nothing to keep.
async function keepStopped(reply, text, before) {
  if (!text) {
    offerPartial(reply, text, before);
    return;
  }
  const id = state.current.id;
  let saved;
  try {
    saved = await apiJson("POST", `/api/conversations/${id}/partial`, { text });
  } catch (error) {
    setStatus(error.message, "error");
    offerPartial(reply, text, before); // not kept: the person still chooses
    return;
  }
  updateMessage(reply, saved);
  if (before) await reloadMessage(reply);
  const box = el("div", "stopped");
  box.append(el("p", "small", "Stopped. What arrived is kept."));
  const undo = button("Undo", async () => {
    undo.disabled = true;
    try {
      if (before) {
        // A stopped regeneration became another version: the one before it is chosen again.
        const position = Number(reply.dataset.chosen) - 1;
        const earlier = await apiJson("POST",
          `/api/conversations/${id}/messages/${saved.id}/alternatives/${Math.max(0, position)}/choose`);
        updateMessage(reply, earlier);
        await reloadMessage(reply);
      } else {
        await api("DELETE", `/api/conversations/${id}/partial/${saved.id}`);
        reply.remove();
      }
      box.remove();
      setStatus(before ? "The earlier reply is back." : "Undone: the stopped reply is gone. Your message is saved.");
      refreshActions();
      revealLastTurn();
      ui.text.focus();
    } catch (error) {
      undo.disabled = false;
      setStatus(error.message, "error");
    }
  }, "quiet small undo-partial");
  box.append(undo);
  // The notice goes with the next action on the thread (a new message, another stop).
  ui.composer.addEventListener("submit", () => box.remove(), { once: true });
  reply.append(box);
  box.scrollIntoView({ block: "end" });
  undo.focus({ preventScroll: true });
}

// Not kept (nothing arrived, or keeping failed): the person chooses to keep what arrived or not.
function offerPartial(reply, text, before) {
  const replyBody = reply.querySelector(".body");
  const box = el("div", "stopped");
  box.append(el("p", "small", text ? "Stopped. Keep what arrived?" : "Stopped before anything arrived."));
  const restore = () => {
    box.remove();
    if (before) replyBody.replaceChildren(...before);
    else reply.remove();
    refreshActions();
    revealLastTurn();
  };
  if (text) {
    box.append(button("Keep partial reply", async () => {
      try {
        const saved = await apiJson("POST", `/api/conversations/${state.current.id}/partial`, { text });
        box.remove();
        updateMessage(reply, saved);
        if (before) await reloadMessage(reply);
        setStatus("The partial reply was kept.");
        refreshActions();
        revealLastTurn();
      } catch (error) {
        setStatus(error.message, "error");
      }
    }, "quiet small keep-partial"));
  }
  box.append(button(text ? "Discard" : "Close", () => {
    restore();
    setStatus(before ? "The earlier reply stays." : "Nothing was kept. Your message is saved.");
  }, "quiet small discard-partial"));
  reply.append(box);
  // All of the choice in view (focusing alone can leave it half under the list's edge on a phone);
  // runSend brings it back into view once the turns' buttons are drawn again.
  box.scrollIntoView({ block: "end" });
  box.querySelector("button").focus({ preventScroll: true });
}

async function reloadMessage(item) {
  const id = Number(item.dataset.messageId);
  if (!id) return;
  const versions = await apiJson("GET", `/api/conversations/${state.current.id}/messages/${id}/alternatives`);
  const chosen = versions.find((v) => v.chosen) || versions[versions.length - 1];
  setMessageData(item, { id, kind: "chat", metadata: { alternatives: versions.length, chosen: chosen.position } });
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
      runSend(() => streamReply(`/api/conversations/${state.current.id}/retry`, {}));
    }));
  }
}

// A reply's buttons (or a stopped reply's choice) are drawn after its text, and drawing the turns'
// buttons again moves the list: the end of the thread comes back into view, as the streamed text
// was, so they never sit under the composer.
function revealLastTurn() {
  const last = document.getElementById("messages").lastElementChild;
  if (last && last.classList.contains("message")) last.scrollIntoView({ block: "end" });
}

async function runSend(work) {
  state.sending = true;
  ui.stop.hidden = false;
  renderHeader();
  refreshActions();
  try {
    await work();
  } catch (error) {
    setStatus(error.message, "error");
  } finally {
    state.sending = false;
    ui.stop.hidden = true;
    renderHeader();
    refreshActions();
    revealLastTurn();
    if (state.current) {
      try {
        await refreshCurrent();
      } catch (error) {
        setStatus(error.message, "error");
      }
    }
    // Back to the message box, unless the person has moved on to another control meanwhile.
    const active = document.activeElement;
    if (!ui.text.disabled && (!active || active === document.body || active === ui.stop)) ui.text.focus();
  }
}

async function sendMessage() {
  const text = ui.text.value;
  if (state.sending) {
    setStatus("The reply is still arriving: send when it is done, or stop it.");
    return;
  }
  if ((!text.trim() && !hasAttachments()) || !state.current) return; // files alone may be sent (W14)
  setStatus("");
  const attached = takeAttachments(); // files of the message (attachments.js, W14)
  const userBubble = addMessage({ role: "user", kind: "chat", content: text, attachments: attached.shown });
  userBubble.classList.add("pending");
  // The words move into the bubble now, so the box is free for the next message while the reply
  // streams (W12): what is typed meanwhile is never cleared when the reply ends. The stored draft
  // (drafts.js) keeps the sent words until the server has them, so an expired session loses nothing.
  ui.text.value = "";
  await runSend(async () => {
    try {
      await streamReply(`/api/conversations/${state.current.id}/messages`, { text, ...attached.body }, { userBubble });
      ui.text.dispatchEvent(new Event("input")); // the stored draft follows the box: empty, or what was typed since
    } catch (error) {
      attached.restore();
      userBubble.remove(); // nothing was saved: the text comes back to the box, before anything typed since
      ui.text.value = ui.text.value.trim() ? `${text}\n\n${ui.text.value}` : text;
      ui.text.dispatchEvent(new Event("input"));
      throw error;
    }
  });
}

connectActions({
  busy: () => state.sending,
  regenerate: (item) => runSend(() => streamReply(`/api/conversations/${state.current.id}/regenerate`, {},
    { into: item })),
  // Editing a message of the person's: the turns after it are put away (the server keeps them as the
  // branch of the earlier version) and the new reply streams in below the edit.
  edit: (userItem, text) => runSend(async () => {
    const id = userItem.dataset.messageId;
    const later = [];
    for (let node = userItem.nextElementSibling; node; node = node.nextElementSibling) later.push(node);
    const before = userItem.querySelector(".body").cloneNode(true);
    updateMessage(userItem, { id: Number(id), kind: "chat", content: text, metadata: {} });
    for (const node of later) node.remove();
    try {
      await streamReply(`/api/conversations/${state.current.id}/messages/${id}/edit`, { text });
    } catch (error) {
      userItem.querySelector(".body").replaceWith(before);
      userItem.after(...later);
      throw error;
    }
    await reloadMessage(userItem);
  }),
  choose: async (item, id, position) => {
    const forward = position > Number(item.dataset.chosen);
    const mine = item.classList.contains("role-user");
    try {
      const saved = await apiJson("POST",
        `/api/conversations/${state.current.id}/messages/${id}/alternatives/${position}/choose`);
      // A message of the person's brings the turns of that version back: the thread is shown again.
      const shown = mine ? await reloadMessages(id) : item;
      if (!mine) updateMessage(item, saved);
      refreshActions();
      // Keep the keyboard on the swipe control, on the side that can still move.
      const [prev, next] = shown ? shown.querySelectorAll(".swipe button") : [];
      const target = forward ? (next && next.disabled ? prev : next) : (prev && prev.disabled ? next : prev);
      if (target) target.focus();
      setStatus(`Version ${position + 1} of ${saved.metadata.alternatives} is the one the conversation continues from.`);
    } catch (error) {
      setStatus(error.message, "error");
    }
  },
});

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

ui.stop.addEventListener("click", () => controller?.abort());
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && controller) controller.abort();
});
