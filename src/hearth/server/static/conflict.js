// A suggestion that repeats or contradicts a kept memory (B3), as the review queue (layers.js) and the
// thread's notice of suggestions (notice.js) show it.

import { button, el } from "./api.js";

// The review queue's view of a suggestion that repeats or contradicts a memory (B3): both texts side
// by side and the three ways to settle it. decide(resolution) approves with that resolution.
export function conflictView(p, decide) {
  const c = p.payload.conflict;
  const box = el("div", "memory-conflict");
  const pair = el("div", "conflict-pair");
  const mine = el("figure", "conflict-side");
  mine.append(el("figcaption", "small muted", "New"), el("p", "conflict-text", p.payload.text));
  const theirs = el("figure", "conflict-side");
  theirs.append(el("figcaption", "small muted", `Kept now (memory #${c.memory_id})`),
    el("p", "conflict-text", c.existing_text));
  pair.append(mine, theirs);
  const verdict = c.relation === "contradiction" ? "These disagree" : "These look like the same fact";
  box.append(el("p", "small", `${verdict} (${c.reason}).`), pair);
  if (c.fallback) {
    // The model judge was configured but failed: say that only the offline rules decided.
    box.append(el("p", "small muted judge-fallback", `Checked by the offline rules only: the model check failed (${c.fallback}).`));
  }
  const actions = el("div", "inline-row");
  actions.append(
    button("Merge", () => decide("merge"), "primary", `Merge into memory #${c.memory_id}`),
    button("Supersede", () => decide("supersede"), "", `Supersede memory #${c.memory_id}`),
    button("Keep both", () => decide("keep_both"), "quiet", "Keep both memories"),
  );
  box.append(actions);
  return box;
}
