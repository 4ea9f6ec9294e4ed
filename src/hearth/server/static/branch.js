// Branch / Fresh Chat. One retry key per source conversation, kept in sessionStorage until the branch
// has opened: a double click, a lost response or a reload mid-request all send the same key, so the
// server returns the same destination instead of making a second thread (H8).

import { $, apiJson } from "./api.js";
import { conversationTitle, setStatus, shared } from "./shared.js";
import { renderHeader, selectConversation } from "./chat.js";
import { loadConversations } from "./threads.js";

const state = shared;

function branchKey(sourceId) {
  const name = `hearth.branch.${sourceId}`;
  let key = sessionStorage.getItem(name);
  if (!key) {
    key = crypto.randomUUID();
    sessionStorage.setItem(name, key);
  }
  return { name, key };
}

async function branchFromCurrent() {
  if (!state.current || state.branching) return;
  const source = state.current;
  state.branching = true;
  renderHeader();
  setStatus("Starting a fresh chat from this conversation…");
  const { name, key } = branchKey(source.id);
  try {
    const result = await apiJson("POST", `/api/conversations/${source.id}/branch`, { retry_key: key });
    sessionStorage.removeItem(name);
    await loadConversations();
    await selectConversation(result.conversation.id);
    setStatus(source.imported ? `Continuing “${conversationTitle(source)}” in a new chat. The handoff is the first message.`
      : `Branched from “${conversationTitle(source)}”. The handoff is the first message.`);
  } catch (error) {
    if (error.status && error.status < 500) sessionStorage.removeItem(name); // refused: a new try gets a new key
    setStatus(error.message, "error");
  } finally {
    state.branching = false;
    renderHeader();
  }
}

$("branch-conversation").addEventListener("click", branchFromCurrent);
// An imported thread is read only: it is continued the same way, in a new thread (organise.js).
$("imported-continue").addEventListener("click", branchFromCurrent);
