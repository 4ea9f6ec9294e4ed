// The colour theme, applied before the first paint: a classic script in the page's <head> (the
// Content-Security-Policy allows no inline script), so the page never flashes the other theme.
// The choice is "light", "dark" or "system" (the default: follows prefers-color-scheme, also when it
// changes), kept in localStorage as hearth.theme. <html data-theme> always holds the colours in use
// ("light" or "dark"); app.css reads it. appearance.js offers the choice.
(() => {
  const KEY = "hearth.theme";
  const system = window.matchMedia("(prefers-color-scheme: dark)");
  // The browser bar's colour: the top bar's background in each theme (app.css --panel).
  const BAR = { light: "#fffdfa", dark: "#26211e" };

  function stored() {
    try {
      const value = window.localStorage.getItem(KEY);
      return value === "light" || value === "dark" ? value : "system";
    } catch (error) {
      return "system"; // storage refused (a private window): follow the system
    }
  }

  function apply(choice = stored()) {
    const theme = choice === "system" ? (system.matches ? "dark" : "light") : choice;
    const root = document.documentElement;
    root.dataset.theme = theme;
    root.dataset.themeChoice = choice;
    const bar = document.querySelector('meta[name="theme-color"]');
    if (bar) bar.content = BAR[theme];
  }

  window.hearthTheme = {
    KEY,
    choice: stored,
    set(choice) {
      try {
        if (choice === "system") window.localStorage.removeItem(KEY);
        else window.localStorage.setItem(KEY, choice);
      } catch (error) {
        // not kept (storage refused), still applied to this page
      }
      apply(choice);
    },
  };
  system.addEventListener("change", () => apply());
  // Another tab changed the choice.
  window.addEventListener("storage", (event) => {
    if (event.key === KEY || event.key === null) apply();
  });
  apply();
})();
