// Message Markdown (W1): markdown-it renders, DOMPurify sanitises, and the result arrives as a DOM
// fragment, so no HTML string is ever assigned to the page. Raw HTML in a message is not
// interpreted at all (html: false shows it as text); the sanitiser is the second wall, with a short
// list of allowed tags and only http(s) and mailto links. Both packages come from npm
// (package-lock.json) and are served from /vendor.

import markdownit from "/vendor/markdown-it.js";
import DOMPurify from "/vendor/purify.js";

const md = markdownit({ html: false, linkify: true, breaks: true, typographer: false });

const ALLOWED_TAGS = ["p", "br", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
  "a", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "table", "thead", "tbody", "tr", "th", "td"];
const SAFE_LINK = /^(?:https?:|mailto:)/i;

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!SAFE_LINK.test(href)) node.removeAttribute("href");
    node.setAttribute("rel", "noopener noreferrer nofollow");
    node.setAttribute("target", "_blank");
  }
});

const PURIFY = {
  ALLOWED_TAGS, ALLOWED_ATTR: ["href", "title", "start", "align"], ALLOWED_URI_REGEXP: SAFE_LINK,
  ALLOW_DATA_ATTR: false, RETURN_DOM_FRAGMENT: true,
};

// A sanitised fragment for a message's Markdown text.
export function markdownFragment(text) {
  return DOMPurify.sanitize(md.render(text).trim(), PURIFY);
}

// Replaces target's children with the rendered text.
export function renderMarkdown(target, text) {
  target.replaceChildren(markdownFragment(text));
}

// A message as plain words, its Markdown marks gone (the timeline, search results and the search
// log): markdown-it's own parse, so what counts as a mark is what the chat renders as one. Block
// ends become line breaks, list items a bullet; an excerpt cut inside a mark loses the mark too.
export function markdownText(text) {
  const lines = [];
  let line = "";
  const flush = () => {
    if (line.trim()) lines.push(line.trim());
    line = "";
  };
  for (const token of md.parse(String(text ?? ""), {})) {
    if (token.type === "inline") {
      for (const child of token.children || []) {
        if (child.type === "text" || child.type === "code_inline" || child.type === "image") line += child.content;
        else if (child.type === "softbreak" || child.type === "hardbreak") line += "\n";
      }
    } else if (token.type === "fence" || token.type === "code_block") {
      flush();
      lines.push(token.content.replace(/\n$/, ""));
    } else if (token.type === "list_item_open") {
      flush();
      line = token.info ? `${token.info}${token.markup} ` : "• ";
    } else if (token.type === "th_close" || token.type === "td_close") {
      line += "  ";
    } else if ((token.block && token.nesting === -1) || token.type === "hr") {
      flush();
    }
  }
  flush();
  return lines.join("\n")
    .replace(/\*\*|__|~~/g, "")
    .replace(/(^|\s)[*_]+(?=\S)/g, "$1")
    .replace(/(\S)[*_]+(?=\s|$|[.,;:!?)])/g, "$1")
    .replace(/^#{1,6}\s+/gm, "");
}
