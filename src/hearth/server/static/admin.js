// Accounts (W10): the owner's page of the people who use this Hearth. It lists them, adds one (a
// log-in name and a password), turns an account off and on again (an account that is off cannot log
// in or use its API tokens; its conversations stay), and issues and revokes API tokens, each shown
// once when it is made. Only the owner sees the page and its menu entry; the server refuses anyone
// else (403).

import { apiJson, button, confirmButton, el, field, formatDate, say } from "./api.js";
import { loadMe, pageView } from "./settings.js";

const { view, inner, header } = pageView("accounts", "Accounts");
header.append(el("p", "lede", "The people who use this Hearth. Each has their own companions, "
  + "conversations and memories; nobody sees anyone else's."));

// Before the owner has a password, the server is open on this computer only and nobody logs in.
const passwordNote = el("section", "card accounts-note");
passwordNote.hidden = true;
const passwordHeading = el("h2", "", "Your password");
passwordHeading.id = "accounts-password-heading";
passwordNote.setAttribute("aria-labelledby", passwordHeading.id);
const passwordForm = el("form", "inline-form");
const ownPassword = field("New password (8 characters or more)", "password", { maxLength: 1024, required: true });
ownPassword.input.autocomplete = "new-password";
ownPassword.input.minLength = 8;
const passwordButton = el("button", "", "Set password");
passwordButton.type = "submit";
const passwordStatus = el("p", "status");
passwordStatus.setAttribute("role", "status");
passwordForm.append(ownPassword.wrap, passwordButton);
passwordNote.append(passwordHeading, el("p", "small", "Nobody else can log in until you set a password: until then "
  + "this Hearth answers only on this computer. Once it is set, everyone logs in, you too."), passwordForm, passwordStatus);
let ownId = null;
passwordForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!passwordForm.reportValidity()) return;
  passwordButton.disabled = true;
  try {
    await apiJson("PATCH", `/api/admin/users/${ownId}`, { password: ownPassword.input.value });
    say(passwordStatus, "Password set. Log in with it now.", "success");
    window.location.assign("/login");
  } catch (error) {
    say(passwordStatus, error.message, "error");
    passwordButton.disabled = false;
  }
});

const listCard = el("section", "card");
listCard.setAttribute("aria-labelledby", "accounts-list-heading");
const listHeading = el("h2", "", "People");
listHeading.id = "accounts-list-heading";
const list = el("ul", "accounts-list");
const listStatus = el("p", "status");
listStatus.setAttribute("role", "status");
listStatus.setAttribute("aria-live", "polite");
listCard.append(listHeading, list, listStatus);

const addCard = el("section", "card");
addCard.setAttribute("aria-labelledby", "accounts-add-heading");
const addHeading = el("h2", "", "Add a person");
addHeading.id = "accounts-add-heading";
const addForm = el("form", "accounts-add");
const newName = field("Log-in name", "text", { maxLength: 64, required: true, placeholder: "sam" });
newName.input.autocomplete = "off";
newName.input.pattern = "[A-Za-z0-9._\\-]{1,64}";
const newPassword = field("Password (8 characters or more)", "password", { maxLength: 1024, required: true });
newPassword.input.autocomplete = "new-password";
newPassword.input.minLength = 8;
const addButton = el("button", "primary", "Add");
addButton.type = "submit";
const addStatus = el("p", "status");
addStatus.setAttribute("role", "status");
addStatus.setAttribute("aria-live", "polite");
addForm.append(newName.wrap, newPassword.wrap, addButton);
addCard.append(addHeading, addForm, addStatus);

inner.append(header, passwordNote, listCard, addCard);
view.append(inner);
document.getElementById("main").append(view);


function tokenPanel(account) {
  const box = el("details", "accounts-tokens");
  const summary = el("summary", "", `API tokens (${account.active_tokens})`);
  box.append(summary);
  const tokens = el("ul", "accounts-token-list");
  const form = el("form", "inline-form accounts-token-form");
  const name = field("Name of the new token", "text", { maxLength: 100, required: true, placeholder: "phone app" });
  name.input.autocomplete = "off";
  const create = el("button", "", "Create token");
  create.type = "submit";
  form.append(name.wrap, create);
  const shown = el("div", "accounts-token-shown");
  shown.hidden = true;
  const status = el("p", "status");
  status.setAttribute("role", "status");
  status.setAttribute("aria-live", "polite");
  box.append(tokens, form, shown, status);

  async function refresh() {
    const rows = await apiJson("GET", `/api/admin/users/${account.id}/tokens`);
    tokens.replaceChildren();
    const active = rows.filter((t) => !t.revoked_at);
    summary.textContent = `API tokens (${active.length})`;
    if (!active.length) tokens.append(el("li", "muted small", "No tokens."));
    for (const token of active) {
      const item = el("li", "accounts-token");
      item.append(el("span", "", token.name), el("span", "muted small", `made ${formatDate(token.created_at)}`),
        confirmButton("Revoke", "Revoke now", async () => {
          await apiJson("DELETE", `/api/admin/users/${account.id}/tokens/${token.id}`);
          say(status, `Token “${token.name}” revoked: it no longer works.`, "success");
          await refresh();
        }, `Revoke ${token.name}`));
      tokens.append(item);
    }
  }

  box.addEventListener("toggle", () => { if (box.open) refresh().catch((e) => say(status, e.message, "error")); });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    create.disabled = true;
    try {
      const made = await apiJson("POST", `/api/admin/users/${account.id}/tokens`, { name: name.input.value });
      name.input.value = "";
      const secret = field(`Token “${made.name}”: copy it now, it is shown only once`, "text", { value: made.token });
      secret.input.readOnly = true;
      secret.input.classList.add("accounts-secret");
      const copy = button("Copy", async () => {
        try {
          await navigator.clipboard.writeText(made.token);
          say(status, "Copied.", "success");
        } catch (_) {
          secret.input.select();
        }
      }, "small");
      shown.replaceChildren(secret.wrap, copy);
      shown.hidden = false;
      secret.input.focus();
      secret.input.select();
      await refresh();
    } catch (error) {
      say(status, error.message, "error");
    } finally {
      create.disabled = false;
    }
  });
  return box;
}

function row(account) {
  const item = el("li", "accounts-person");
  item.dataset.account = account.name;
  const who = el("div", "accounts-who");
  who.append(el("strong", "", account.display_name || account.name));
  const about = [account.display_name ? `logs in as ${account.name}` : "", account.is_owner ? "owner" : "",
    account.disabled ? "turned off" : "", `since ${formatDate(account.created_at)}`].filter(Boolean).join(" · ");
  who.append(el("span", "muted small", about));
  item.append(who);
  if (!account.is_owner) {
    const toggle = button(account.disabled ? "Turn on" : "Turn off", async () => {
      toggle.disabled = true;
      try {
        await apiJson("PATCH", `/api/admin/users/${account.id}`, { disabled: !account.disabled });
        say(listStatus, account.disabled ? `${account.name} can log in again.`
          : `${account.name} is turned off: no log-in, no API tokens. Their conversations stay.`, "success");
        await showAdmin();
      } catch (error) {
        say(listStatus, error.message, "error");
        toggle.disabled = false;
      }
    }, "small", `${account.disabled ? "Turn on" : "Turn off"} ${account.name}`);
    item.append(toggle);
  }
  item.append(tokenPanel(account));
  if (account.disabled) item.classList.add("off");
  return item;
}

addForm.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!addForm.reportValidity()) return;
  addButton.disabled = true;
  try {
    const made = await apiJson("POST", "/api/admin/users", { name: newName.input.value, password: newPassword.input.value });
    newName.input.value = "";
    newPassword.input.value = "";
    say(addStatus, `${made.name} can now log in with that password.`, "success");
    await showAdmin();
  } catch (error) {
    say(addStatus, error.message, "error");
  } finally {
    addButton.disabled = false;
  }
});

export async function showAdmin() {
  const me = await loadMe();
  if (!me.user.is_owner) {
    list.replaceChildren();
    say(listStatus, "Only the owner of this Hearth manages accounts.", "error");
    addCard.hidden = true;
    return;
  }
  addCard.hidden = false;
  ownId = me.user.id;
  passwordNote.hidden = me.password_configured;
  const accounts = await apiJson("GET", "/api/admin/users");
  list.replaceChildren(...accounts.map(row));
}
