// The messages in the log: the user's (plain text), replies (markdown, with their figures
// and a cache badge), and errors a user can act on (a countdown, a retry).
import { copyButton, renderMarkdown } from "./markdown.js";
import {
  cacheBadgeText, countdownText, errorAdvice, figuresText, servedByCache,
} from "./format.js";

// A turn: the message itself (only its text, so it reads and copies cleanly), then the
// figures and buttons that belong to it.
function turn(role, label) {
  const element = document.createElement("div");
  element.className = `turn ${role}`;
  const message = document.createElement("article");
  message.className = `message ${role}`;
  message.setAttribute("aria-label", label);
  const content = document.createElement("div");
  content.className = "content";
  message.append(content);
  element.append(message);
  return element;
}

export function userMessage(text) {
  const element = turn("user", "You");
  element.querySelector(".content").textContent = text;
  return element;
}

// A reply; `reply` has at least {content}, and once finished the figures of its event
// or record (model, tokens, cost_micros, ttft_ms, cache, stopped).
export function assistantMessage(reply, finished = true) {
  const element = turn("assistant", "Reply");
  updateReply(element, reply.content);
  if (finished) finishReply(element, reply);
  return element;
}

export function updateReply(element, text) {
  renderMarkdown(element.querySelector(".content"), text);
}

export function finishReply(element, reply) {
  const footer = document.createElement("footer");
  footer.className = "figures";
  if (servedByCache(reply.cache)) {
    const badge = document.createElement("span");
    badge.className = "badge cache";
    badge.textContent = cacheBadgeText(reply.cache);
    badge.title = "Answered from the cache: no GPU time, no cost";
    footer.append(badge);
  }
  if (reply.stopped) {
    const badge = document.createElement("span");
    badge.className = "badge stopped";
    badge.textContent = "stopped";
    footer.append(badge);
  }
  const figures = document.createElement("span");
  figures.className = "numbers";
  figures.textContent = figuresText(reply);
  footer.append(figures, copyButton(() => reply.content, "Copy reply"));
  element.append(footer);
}

// Buttons under a message (Edit, Regenerate, Retry): [{label, run}].
export function addActions(element, actions) {
  element.querySelector(".message-actions")?.remove();
  if (actions.length === 0) return;
  const bar = document.createElement("div");
  bar.className = "message-actions";
  for (const { label, run } of actions) bar.append(button("button", label, run));
  element.append(bar);
}

// An error event as something to act on; onRetry is offered when trying again can help
// (after the countdown, for a quota).
export function errorMessage(event, onRetry) {
  const advice = errorAdvice(event);
  const element = turn("error", "Error");
  element.querySelector(".message").setAttribute("role", "alert");
  const content = element.querySelector(".content");
  const title = document.createElement("strong");
  title.textContent = advice.title;
  content.append(title);
  if (advice.detail) {
    const detail = document.createElement("p");
    detail.className = "detail";
    detail.textContent = advice.detail;
    content.append(detail);
  }
  const retry = advice.retry && onRetry ? { label: "Try again", run: onRetry } : null;
  if (advice.retryAfter !== null && advice.retryAfter > 0) {
    const clock = document.createElement("p");
    clock.className = "countdown";
    clock.setAttribute("role", "timer"); // read on request, not every second
    content.append(clock);
    startCountdown(clock, advice, () => addActions(element, retry ? [retry] : []));
  } else if (retry) {
    addActions(element, [retry]);
  }
  return element;
}

function startCountdown(clock, advice, whenDone) {
  const until = Date.now() + advice.retryAfter * 1000;
  const what = advice.quota ? "The limit resets in" : "Try again in";
  const tick = () => {
    const left = (until - Date.now()) / 1000;
    if (left <= 0) {
      clock.textContent = advice.quota ? "The limit has reset: you can send again." : "";
      clearInterval(timer);
      whenDone();
      return;
    }
    clock.textContent = `${what} ${countdownText(left)}.`;
  };
  const timer = setInterval(() => {
    if (!clock.isConnected) clearInterval(timer);
    else tick();
  }, 250);
  tick();
}

// Edit and resend: the question in a text box in place of the message. Enter sends (as
// in the composer), Escape or Cancel puts the message back.
export function questionEditor(element, text, onSend, onCancel) {
  const editor = document.createElement("form");
  editor.className = "editor";
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("aria-label", "Edit your message");
  editor.append(area, button("submit", "Send"), button("button", "Cancel", onCancel));
  element.replaceChildren(editor);
  area.focus();
  area.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      editor.requestSubmit();
    } else if (event.key === "Escape") {
      onCancel();
    }
  });
  editor.addEventListener("submit", (event) => {
    event.preventDefault();
    const edited = area.value.trim();
    if (edited) onSend(edited);
  });
}

function button(type, label, onClick = null) {
  const element = document.createElement("button");
  element.type = type;
  element.textContent = label;
  if (onClick) element.addEventListener("click", onClick);
  return element;
}
