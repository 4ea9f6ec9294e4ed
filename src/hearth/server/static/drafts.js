// Drafts (W7): what is typed in the message box is kept in localStorage per conversation, so it
// survives a reload, a closed tab or an expired session (the login page returns to the thread).

import { $ } from "./api.js";

const text = $("composer-text");
const key = (id) => `hearth.draft.${id}`;
let timer = 0;
let owner = null; // the conversation whose draft the box holds

export function restoreDraft(id) {
  // The same thread opened again (a reload of the list, a second click, a hash change while it
  // loads) keeps what is in the box: the stored draft may be a quarter of a second behind it.
  if (id === owner) return;
  flush();
  owner = id;
  text.value = localStorage.getItem(key(id)) || "";
}

function save() {
  timer = 0;
  if (owner === null) return;
  if (text.value) localStorage.setItem(key(owner), text.value);
  else localStorage.removeItem(key(owner));
}

function flush() {
  if (!timer) return;
  clearTimeout(timer);
  save();
}

text.addEventListener("input", () => {
  // Saved a moment after typing stops, so typing never waits on storage.
  if (timer) clearTimeout(timer);
  timer = setTimeout(save, 250);
  if (!text.value) save();
});

// A session that expires sends the page to the login form: remember where to come back to.
window.addEventListener("hearth:login-needed", () => {
  flush();
  localStorage.setItem("hearth.return", window.location.hash);
});
