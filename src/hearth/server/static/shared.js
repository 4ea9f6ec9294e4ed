// State shared between the panels: the thread list, folders, personas and the open conversation.
export const shared = { conversations: [], folders: [], personas: [], current: null };
