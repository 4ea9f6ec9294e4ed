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
