// Persona avatars (W3) wherever a persona appears: the thread list, each reply's bubble, the persona
// list. The image's URL carries the persona's avatar_version, so the browser keeps it for good and a
// list of thousands of threads fetches each persona's image once; a persona without one shows the
// initial of its name.

import { el } from "./api.js";
import { shared } from "./shared.js";

export function avatarUrl(persona) {
  return `/api/personas/${persona.id}/avatar?v=${encodeURIComponent(persona.avatar_version)}`;
}

// persona: the persona object or its id. `labelled`: the name is not written beside the avatar, so
// it carries the name itself; otherwise it is decoration next to the name (empty alt text).
export function avatarFor(persona, { size = "small", labelled = false } = {}) {
  const p = typeof persona === "object" && persona ? persona : shared.personas.find((x) => x.id === persona);
  const name = p ? p.display_name : "Companion";
  if (p && p.avatar_version) {
    const image = el("img", `persona-avatar ${size}`);
    image.alt = labelled ? name : "";
    image.width = image.height = size === "large" ? 72 : 28;
    image.loading = "lazy";
    image.decoding = "async";
    image.addEventListener("error", () => image.replaceWith(initial(name, size, labelled)), { once: true });
    image.src = avatarUrl(p);
    return image;
  }
  return initial(name, size, labelled);
}

// The letter is drawn by CSS from data-initial, so it never joins the text around it (a bubble's
// "who" line reads as the name alone).
function initial(name, size, labelled) {
  const node = el("span", `persona-avatar initial ${size}`);
  node.dataset.initial = ([...name.trim()][0] || "?").toUpperCase();
  if (labelled) {
    node.setAttribute("role", "img");
    node.setAttribute("aria-label", name);
  } else {
    node.setAttribute("aria-hidden", "true");
  }
  return node;
}
