// Hearth's service worker (the installable app). The server puts VERSION and SHELL in front of this
// file (pwa.py). It keeps a copy of the app shell only: the page, its scripts and styles, the vendor
// files, the manifest and the icons. It never answers, caches or even looks at anything else: API
// calls, streamed replies, login and logout, channel webhooks and the OpenAI-compatible routes go
// to the network exactly as they would without it. Shell files are fetched from the network first
// (so the page is never older than the server); the copy is only used when the server cannot be
// reached.
/* global VERSION, SHELL */

const CACHE = `hearth-shell-${VERSION}`;
const SHELL_PATHS = new Set(SHELL);

function isShell(url) {
  return url.origin === self.location.origin && url.search === "" && SHELL_PATHS.has(url.pathname);
}

// Paths whose requests never reach this worker where the browser can route them itself (the static
// routing API): they go straight to the network, as if there were no worker, with no cost or delay.
// (Not /login: the fetch handler sees it, to drop the kept page.)
const NETWORK_ONLY = ["/api/*", "/v1/*", "/v1", "/channels/*", "/mcp", "/mcp/*"];

self.addEventListener("install", (event) => {
  const routed = event.addRoutes
    ? event.addRoutes(NETWORK_ONLY.map((path) => ({ condition: { urlPattern: path }, source: "network" })))
      .catch(() => {}) // not supported here: the fetch handler below lets them through instead
    : Promise.resolve();
  event.waitUntil(routed.then(keepAll).then(() => self.skipWaiting()));
});

// One file after the other (a burst of requests would slow the page and the server for nothing);
// one that cannot be fetched (the session ended meanwhile) does not stop the rest.
async function keepAll() {
  const cache = await caches.open(CACHE);
  for (const path of SHELL) {
    try {
      await keep(cache, path);
    } catch (error) {
      // left out of the copy: fetched from the network when the page asks for it
    }
  }
}

// No clients.claim(): a page that was opened without the worker keeps going without it, and the
// worker serves the pages opened after it (a page changing hands halfway can no longer reuse the
// images it has already loaded).
self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys()
    .then((names) => Promise.all(names.filter((n) => n.startsWith("hearth-shell-") && n !== CACHE)
      .map((n) => caches.delete(n)))));
});

async function keep(cache, path) {
  const response = await fetch(path, { credentials: "same-origin", redirect: "manual" });
  if (storable(response)) await cache.put(path, response);
}

// Only a whole, successful, same-origin answer is kept: never a redirect (to the login page) or an error.
function storable(response) {
  return response.ok && response.type === "basic" && !response.redirected;
}

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (url.pathname === "/login") {
    // Logged out or the session ended: the kept page (with that session's form token) goes.
    event.waitUntil(caches.open(CACHE).then((cache) => cache.delete("/")));
    return;
  }
  if (!isShell(url)) return; // the network, untouched
  event.respondWith(networkFirst(request, url.pathname));
});

async function networkFirst(request, path) {
  try {
    const response = await fetch(request);
    if (storable(response)) {
      const copy = response.clone();
      caches.open(CACHE).then((cache) => cache.put(path, copy));
    }
    return response;
  } catch (error) {
    const kept = await caches.match(path, { cacheName: CACHE });
    if (kept) return kept;
    throw error;
  }
}
