// Message Markdown (W1, W13): markdown-it renders, DOMPurify sanitises, and the result arrives as a
// DOM fragment, so no HTML string is ever assigned to the page. Raw HTML in a message is not
// interpreted at all (html: false shows it as text); the sanitiser is the second wall, with a short
// list of allowed tags and only http(s) and mailto links. Code blocks are coloured by highlight.js
// (class names only) and get a Copy button; `$...$` and `$$...$$` become MathML through KaTeX (its
// MathML output needs no inline styles, so the page's strict style policy stays). Every package
// comes from npm (package-lock.json) and is served from /vendor.

import markdownit from "/vendor/markdown-it.js";
import DOMPurify from "/vendor/purify.js";
import { iconButton, setIcon } from "./icons.js";

// Guessing a language costs a pass per grammar: only short blocks without a name are guessed.
const GUESS_LIMIT = 2000;

// highlight.js (130 KB) is fetched the first time a message holds a code block, as KaTeX is for
// maths, so opening the page never waits for it. Blocks drawn before it arrives show plain, then
// are coloured in place.
let hljs = null;
let loadingCode = null;

function loadHighlighter() {
  if (!loadingCode) {
    loadingCode = import("/vendor/highlight.js").then((module) => {
      hljs = module.default;
      for (const code of document.querySelectorAll("pre > code")) {
        if (code.querySelector("[class^='hljs']")) continue;
        const lang = (code.className.match(/(?:^|\s)language-(\S+)/) || [])[1] || "";
        const html = highlight(code.textContent, lang);
        if (html) code.replaceChildren(DOMPurify.sanitize(html));
      }
    });
  }
  return loadingCode;
}

function highlight(code, lang) {
  if (!hljs) {
    loadHighlighter();
    return "";
  }
  try {
    if (lang && hljs.getLanguage(lang)) return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
    if (!lang && code.length <= GUESS_LIMIT) return hljs.highlightAuto(code).value;
  } catch (error) {
    // an odd grammar edge: the block is shown plain (markdown-it escapes it)
  }
  return "";
}

const md = markdownit({ html: false, linkify: true, breaks: true, typographer: false, highlight });

// -- maths: $...$ inline, $$...$$ as a block (or inline, displayed) ---------------------------------
// An opening $ is followed by a non-space, a closing $ follows a non-space and is not followed by a
// digit, so prices ("$5 and $10") stay text. A backslash escapes a dollar.
// KaTeX is large: it is fetched the first time a message holds maths, so a page without any never
// pays for it. Until it has arrived the formula waits as its source text, then is typeset in place.
let katex = null;
let loading = null;

function typeset(source, displayMode) {
  return katex.renderToString(source, { displayMode, output: "mathml", throwOnError: false, maxSize: 50, maxExpand: 200 });
}

function loadMath() {
  if (!loading) {
    loading = import("/vendor/katex.js").then((module) => {
      katex = module.default;
      for (const node of document.querySelectorAll(".math-pending")) {
        node.replaceWith(DOMPurify.sanitize(typeset(node.textContent, node.classList.contains("display"))));
      }
    });
  }
  return loading;
}

function tex(source, displayMode) {
  if (katex) return typeset(source, displayMode);
  loadMath();
  return `<span class="math-pending${displayMode ? " display" : ""}">${md.utils.escapeHtml(source)}</span>`;
}

function mathInline(state, silent) {
  const src = state.src;
  const start = state.pos;
  if (src.charCodeAt(start) !== 0x24 /* $ */) return false;
  const display = src.charCodeAt(start + 1) === 0x24;
  const open = display ? 2 : 1;
  if (!display && (start + 1 >= state.posMax || /\s/.test(src[start + 1]))) return false;
  let end = start + open;
  for (;;) {
    end = src.indexOf(display ? "$$" : "$", end);
    if (end < 0 || end >= state.posMax) return false;
    if (src[end - 1] === "\\") {
      end += 1;
      continue;
    }
    if (!display && (/\s/.test(src[end - 1]) || /\d/.test(src[end + 1] || ""))) {
      end += 1;
      continue;
    }
    break;
  }
  const content = src.slice(start + open, end);
  if (!content.trim()) return false;
  if (!silent) {
    const token = state.push(display ? "math_display" : "math_inline", "math", 0);
    token.content = content;
  }
  state.pos = end + open;
  return true;
}

function mathBlock(state, startLine, endLine, silent) {
  const first = state.bMarks[startLine] + state.tShift[startLine];
  const lineEnd = state.eMarks[startLine];
  if (state.src.slice(first, first + 2) !== "$$") return false;
  const rest = state.src.slice(first + 2, lineEnd);
  let content;
  let last = startLine;
  if (rest.trim().endsWith("$$") && rest.trim().length > 2) {
    content = rest.trim().slice(0, -2);
  } else {
    const lines = [rest];
    let found = false;
    for (let line = startLine + 1; line < endLine; line += 1) {
      const text = state.src.slice(state.bMarks[line] + state.tShift[line], state.eMarks[line]);
      if (text.trim().endsWith("$$")) {
        lines.push(text.trim().slice(0, -2));
        last = line;
        found = true;
        break;
      }
      lines.push(text);
    }
    if (!found) return false;
    content = lines.join("\n");
  }
  if (silent) return true;
  const token = state.push("math_block", "math", 0);
  token.block = true;
  token.content = content;
  token.map = [startLine, last + 1];
  state.line = last + 1;
  return true;
}

md.inline.ruler.after("escape", "math_inline", mathInline);
md.block.ruler.before("fence", "math_block", mathBlock, { alt: ["paragraph", "reference", "blockquote", "list"] });
md.renderer.rules.math_inline = (tokens, idx) => tex(tokens[idx].content, false);
md.renderer.rules.math_display = (tokens, idx) => tex(tokens[idx].content, true);
md.renderer.rules.math_block = (tokens, idx) => `<p class="math-block">${tex(tokens[idx].content, true)}</p>\n`;

const MATHML = ["math", "semantics", "annotation", "mrow", "mi", "mo", "mn", "ms", "mtext", "mspace", "msup", "msub",
  "msubsup", "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd", "mstyle",
  "mpadded", "mphantom", "menclose", "merror", "mmultiscripts", "mprescripts", "none"];
const ALLOWED_TAGS = ["p", "br", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
  "a", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "table", "thead", "tbody", "tr", "th", "td", "span", ...MATHML];
const MATH_ATTR = ["display", "encoding", "mathvariant", "stretchy", "fence", "separator", "lspace", "rspace",
  "accent", "accentunder", "columnalign", "rowspacing", "columnspacing", "scriptlevel", "displaystyle", "minsize",
  "maxsize", "movablelimits", "linethickness", "width", "height", "depth", "voffset", "notation", "xmlns"];
const SAFE_LINK = /^(?:https?:|mailto:)/i;

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!SAFE_LINK.test(href)) node.removeAttribute("href");
    node.setAttribute("rel", "noopener noreferrer nofollow");
    node.setAttribute("target", "_blank");
  }
});

// Set once for every sanitize call of the page (all of them are here): passing it on each call made
// DOMPurify parse it again for every message.
DOMPurify.setConfig({
  ALLOWED_TAGS, ALLOWED_ATTR: ["href", "title", "start", "align", "class", ...MATH_ATTR], ALLOWED_URI_REGEXP: SAFE_LINK,
  ALLOW_DATA_ATTR: false, RETURN_DOM_FRAGMENT: true,
});

// A Copy button on each code block, made here (never from the message's text).
function addCopyButtons(fragment) {
  for (const pre of fragment.querySelectorAll("pre")) {
    const block = document.createElement("div");
    block.className = "code-block";
    pre.replaceWith(block);
    const copy = iconButton("copy", "Copy code", async () => {
      try {
        await navigator.clipboard.writeText(pre.textContent.replace(/\n$/, ""));
        setIcon(copy, "check", "Copied");
      } catch (error) {
        setIcon(copy, "copy", "The browser did not allow copying");
      }
      setTimeout(() => setIcon(copy, "copy", "Copy code"), 2000);
    }, "quiet small copy-code");
    block.append(copy, pre);
  }
  return fragment;
}

// A sanitised fragment for a message's Markdown text.
export function markdownFragment(text) {
  return addCopyButtons(DOMPurify.sanitize(md.render(text).trim()));
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
        if (["text", "code_inline", "image", "math_inline", "math_display"].includes(child.type)) line += child.content;
        else if (child.type === "softbreak" || child.type === "hardbreak") line += "\n";
      }
    } else if (token.type === "fence" || token.type === "code_block" || token.type === "math_block") {
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
