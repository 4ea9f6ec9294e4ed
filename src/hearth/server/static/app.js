// Hearth web UI entry point. It asks at once for what the first screen shows (the thread list, the
// persona list, who the person is and the thread named in the address), then runs the app shell
// (shell.js: the panels and start-up). The page names the shell's modules as modulepreload hints, so
// they arrive while these answers do, instead of the answers being asked for only once every module
// has arrived. Each module still asks for what it needs; the first such read of a path asked for here
// takes the early answer (api.js).

import { readEarly } from "./api.js";

// The same paths the modules ask for: threads.js (its lists' first pages of 50, the folders and the
// personas), profile.js, voice.js, and chat.js for the open thread (its newest page of 150).
const FIRST = ["/api/conversations?loose=true&pinned=false&limit=50", "/api/conversations?pinned=true&limit=50",
  "/api/folders", "/api/personas?include_archived=true", "/api/auth/me", "/api/voice/ability"];
const open = /^#conversation-(\d+)$/.exec(window.location.hash);
const thread = open ? [`/api/conversations/${open[1]}`, `/api/conversations/${open[1]}/messages?newest=150`,
  `/api/conversations/${open[1]}/request-size`, `/api/conversations/${open[1]}/snapshot`] : [];
for (const path of [...thread, ...FIRST]) readEarly(path);

import("./shell.js");
