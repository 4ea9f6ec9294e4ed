// The installable app: registers the service worker (sw.js, served at /sw.js by the server so its
// scope is the whole app) once the page has started (body[data-ready], set by app.js) and the
// browser is idle, so its first copy of the shell never competes with the page's own requests.
// It keeps the app shell only; see sw.js.

function register() {
  navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch(() => {
    // Not installable here (a browser setting, a private window): the page works the same without it.
  });
}

function whenStarted() {
  const idle = window.requestIdleCallback || ((fn) => setTimeout(fn, 200));
  if (document.body.dataset.ready) {
    idle(register, { timeout: 5000 });
    return;
  }
  const watch = new MutationObserver(() => {
    if (!document.body.dataset.ready) return;
    watch.disconnect();
    idle(register, { timeout: 5000 });
  });
  watch.observe(document.body, { attributes: true, attributeFilter: ["data-ready"] });
}

if ("serviceWorker" in navigator && window.isSecureContext) whenStarted();
