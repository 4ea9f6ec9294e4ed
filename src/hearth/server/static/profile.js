// Who the person is (GET /api/auth/me), read once as the page starts: their name labels their
// messages and is what companions call them ({{user}}), and the owner sees the Accounts entry of the
// menu. Settings and the welcome change the name through saveName; the panels that show it listen
// for the "hearth:me" event.

import { apiJson } from "./api.js";
import { shared } from "./shared.js";

function announce(me) {
  shared.me = me;
  shared.userName = me.display_name || "";
  document.dispatchEvent(new CustomEvent("hearth:me", { detail: me }));
  return me;
}

export async function loadMe() {
  return announce(await apiJson("GET", "/api/auth/me"));
}

export async function saveName(value) {
  return announce(await apiJson("PATCH", "/api/auth/me", { display_name: value }));
}

document.addEventListener("hearth:me", (event) => {
  // Messages drawn before the name arrived (or before it changed) get it now.
  for (const who of document.querySelectorAll(".message.role-user .who")) who.textContent = shared.userName || "You";
  // The menu entry shows for the owner only (the API refuses everyone else anyway).
  const accounts = document.getElementById("nav-accounts");
  if (accounts) accounts.hidden = !event.detail.user.is_owner;
});
