// The theme picker in the top bar: System (follows prefers-color-scheme), Light or Dark. theme.js
// applies the stored choice before the first paint; this only offers the choice and keeps it.

import { $ } from "./api.js";

const select = $("theme-select");
if (select && window.hearthTheme) {
  select.value = window.hearthTheme.choice();
  select.addEventListener("change", () => window.hearthTheme.set(select.value));
  // Another tab changed it (theme.js has already applied it).
  window.addEventListener("storage", () => {
    select.value = window.hearthTheme.choice();
  });
}
