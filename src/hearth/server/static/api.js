// Shared helpers for the Hearth page: JSON calls with the CSRF token, and safe element building.
// User text is only ever placed with textContent, never parsed as HTML.

const csrfMeta = document.querySelector('meta[name="csrf-token"]');
const csrfToken = csrfMeta ? csrfMeta.content : "";

export class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail);
    this.status = status;
    this.code = code;
  }
}

let leaving = false; // on the way to the login page

// Go to the login page once: other requests of the page may meet the ended session a moment later,
// and a second navigation would cancel the first one while it loads.
export function leaveForLogin() {
  if (leaving) return;
  leaving = true;
  window.location.assign("/login");
}

export async function api(method, path, body, { signal } = {}) {
  const headers = { "X-CSRF-Token": csrfToken, Accept: "application/json" };
  const init = { method, headers, credentials: "same-origin", signal };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (error.name === "AbortError") throw error; // stopped on purpose
    throw new ApiError(0, "network", "The server could not be reached.");
  }
  if (response.status === 401 && !leaving) {
    window.dispatchEvent(new Event("hearth:login-needed")); // the draft and the open thread are kept
    leaveForLogin();
  }
  if (!response.ok) {
    let code = "error";
    let detail = `Request failed (${response.status})`;
    try {
      const data = await response.json();
      code = data.error || code;
      detail = data.detail || detail;
    } catch (_) {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, code, detail);
  }
  return response;
}

// Reads asked for ahead, as the page starts (app.js), before the modules that use them have arrived:
// the first GET of the same path takes its answer instead of asking again. What is left when the
// page is ready is dropped, so no later read ever gets an old answer.
const early = new Map();

export function readEarly(path) {
  const answer = apiJson("GET", path);
  answer.catch(() => {}); // reported by the module that takes it; unnoticed if nothing does
  early.set(path, answer);
}

export function dropEarly() {
  early.clear();
}

export async function apiJson(method, path, body) {
  const ahead = method === "GET" ? early.get(path) : undefined;
  if (ahead) {
    early.delete(path);
    return ahead;
  }
  const response = await api(method, path, body);
  if (response.status === 204) return null;
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

export const $ = (id) => document.getElementById(id);

// Moves the focus to `node` once an awaited action is done, unless the person has moved it since
// the action began at `from` (clicked into the search box while a rename saved): it stays there.
export function focusAfter(node, from) {
  const active = document.activeElement;
  const moved = active && active !== from && active !== document.body && active.isConnected
    && !active.closest("[hidden]");
  if (node && !moved) node.focus();
}

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

export function button(label, onClick, className = "quiet", ariaLabel) {
  const node = el("button", className, label);
  node.type = "button";
  if (ariaLabel) node.setAttribute("aria-label", ariaLabel);
  if (onClick) node.addEventListener("click", onClick);
  return node;
}

let idCounter = 0;

// A labelled form control: returns {wrap, input}. kind is input type, "textarea" or "select".
export function field(labelText, kind = "text", options = {}) {
  idCounter += 1;
  const id = `f${idCounter}`;
  const wrap = el("div", `field ${options.className || ""}`.trim());
  let input;
  if (kind === "textarea") {
    input = el("textarea");
    input.rows = options.rows || 3;
  } else if (kind === "select") {
    input = el("select");
    for (const [value, label] of options.choices || []) {
      const option = el("option", "", label);
      option.value = value;
      input.append(option);
    }
  } else {
    input = el("input");
    input.type = kind;
  }
  input.id = id;
  if (options.name) input.name = options.name;
  if (options.value !== undefined && options.value !== null) {
    if (kind === "checkbox") input.checked = Boolean(options.value);
    else input.value = String(options.value);
  }
  if (options.maxLength) input.maxLength = options.maxLength;
  if (options.min !== undefined) input.min = String(options.min);
  if (options.max !== undefined) input.max = String(options.max);
  if (options.placeholder) input.placeholder = options.placeholder;
  if (options.required) input.required = true;
  const label = el("label", "", labelText);
  label.htmlFor = id;
  if (kind === "checkbox") {
    wrap.classList.add("check");
    wrap.append(input, label);
  } else {
    wrap.append(label, input);
  }
  return { wrap, input };
}

export function formatNumber(n) {
  return typeof n === "number" ? n.toLocaleString() : String(n);
}

// One formatter for every date: building one per call (what toLocaleString does) costs more than the
// rest of drawing a thread list.
const DATE_FORMAT = new Intl.DateTimeFormat([], { dateStyle: "medium", timeStyle: "short" });

export function formatDate(stamp) {
  if (!stamp) return "–";
  const date = new Date(stamp);
  if (Number.isNaN(date.getTime())) return String(stamp);
  return DATE_FORMAT.format(date);
}

// Comma- or newline-separated words -> trimmed, non-empty list.
export function splitList(text) {
  return String(text || "").split(/[,\n]/).map((s) => s.trim()).filter(Boolean);
}

// A status line: writes a notice into a role=status element.
export function say(node, text, kind = "info") {
  if (!node) return;
  node.textContent = text;
  node.dataset.kind = kind;
}

// A button that asks once more inline instead of a dialog: first click arms, second acts.
export function confirmButton(label, confirmLabel, action, ariaLabel) {
  const node = button(label, null, "quiet small danger", ariaLabel);
  let armed = false;
  let timer = null;
  // The accessible name follows the visible label, so the second step is announced too.
  const named = (text) => {
    node.textContent = text;
    if (ariaLabel) node.setAttribute("aria-label", ariaLabel.replace(label, text));
  };
  node.addEventListener("click", async () => {
    if (!armed) {
      armed = true;
      named(confirmLabel);
      node.classList.add("armed");
      timer = setTimeout(() => {
        armed = false;
        named(label);
        node.classList.remove("armed");
      }, 5000);
      return;
    }
    clearTimeout(timer);
    node.disabled = true;
    try {
      await action();
    } finally {
      node.disabled = false;
    }
  });
  return node;
}

export function emptyNote(text) {
  return el("p", "muted empty", text);
}
