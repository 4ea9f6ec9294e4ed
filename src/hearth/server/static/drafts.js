// Drafts (W7): what is typed in the message box is kept in localStorage per conversation, so it
// survives a reload, a closed tab or an expired session (the login page returns to the thread).

import { $ } from "./api.js";
import { shared } from "./shared.js";

const text = $("composer-text");
const key = (id) => `hearth.draft.${id}`;
let timer = 0;

export function restoreDraft(id) {
  const saved = localStorage.getItem(key(id));
  text.value = saved || "";
}

function save() {
  timer = 0;
  if (!shared.current) return;
  if (text.value) localStorage.setItem(key(shared.current.id), text.value);
  else localStorage.removeItem(key(shared.current.id));
}

text.addEventListener("input", () => {
  // Saved a moment after typing stops, so typing never waits on storage.
  if (timer) clearTimeout(timer);
  timer = setTimeout(save, 250);
  if (!text.value) save();
});

// A session that expires sends the page to the login form: remember where to come back to.
window.addEventListener("hearth:login-needed", () => {
  if (timer) {
    clearTimeout(timer);
    save();
  }
  localStorage.setItem("hearth.return", window.location.hash);
});
