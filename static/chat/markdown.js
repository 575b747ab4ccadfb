// Model replies as markdown, rendered safely. A reply is text from a model that anyone's
// prompt can steer, so it is treated as hostile:
// 1. markdown-it with raw HTML off escapes every tag the model writes, and its link check
//    refuses javascript:, vbscript:, file: and data: URLs;
// 2. images are off: a remote image would load by itself and could carry the conversation
//    to another site in its URL (an image written by the model shows as a link instead);
// 3. DOMPurify sanitises markdown-it's output all the same (a parser bug must not become a
//    script), and the result is inserted as a DOM fragment, never as an HTML string.
// Libraries: static/chat/vendor/, copied from npm by `make frontend` (frontend/).
import markdownit from "./vendor/markdown-it.js";
import DOMPurify from "./vendor/purify.js";
import hljs from "./vendor/highlight.js";

const markdown = markdownit({
  html: false,
  linkify: true,
  typographer: false,
  highlight(code, language) {
    if (language && hljs.getLanguage(language)) {
      try {
        return hljs.highlight(code, { language, ignoreIllegals: true }).value;
      } catch {
        // fall through: markdown-it escapes the code as plain text
      }
    }
    return "";
  },
}).disable("image");

const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img", "svg", "math"],
  FORBID_ATTR: ["style", "id", "name"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  RETURN_DOM_FRAGMENT: true,
};

// Links open in a new tab and give the other site no handle on this page.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

export function renderMarkdown(target, text) {
  target.replaceChildren(DOMPurify.sanitize(markdown.render(text), PURIFY));
  decorateCode(target);
}

// Each code block gets a header with its language and a Copy button.
function decorateCode(root) {
  for (const pre of root.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    if (!code) continue;
    code.classList.add("hljs");
    const language = [...code.classList].find((name) => name.startsWith("language-"));
    const block = document.createElement("div");
    block.className = "code-block";
    const header = document.createElement("div");
    header.className = "code-header";
    const label = document.createElement("span");
    label.textContent = language ? language.slice("language-".length) : "code";
    header.append(label, copyButton(() => code.textContent, "Copy code"));
    pre.replaceWith(block);
    block.append(header, pre);
  }
}

export function copyButton(text, label = "Copy") {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  button.textContent = label;
  button.addEventListener("click", async () => {
    try {
      await copyText(text());
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed";
    }
    setTimeout(() => { button.textContent = label; }, 2000);
  });
  return button;
}

// The Clipboard API needs a secure context (https or localhost); elsewhere, the old way.
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return;
    } catch {
      // permission refused: try the old way below
    }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  area.select();
  const copied = document.execCommand("copy");
  area.remove();
  if (!copied) throw new Error("the browser refused to copy");
}
