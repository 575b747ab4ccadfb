// The web chat: conversations from /chat/api/ (api.js), replies over one WebSocket
// (socket.js, protocol in docs/websocket.md), the list in the sidebar (sidebar.js), the
// messages in the log (messages.js, markdown.js).
import { conversations } from "./api.js";
import { quotaText, usageText } from "./format.js";
import {
  addActions, assistantMessage, errorMessage, questionEditor, updateReply, userMessage,
} from "./messages.js";
import { Sidebar } from "./sidebar.js";
import { ChatSocket } from "./socket.js";

// Room for a long answer; the team's quota reserves this much until the reply is done.
const MAX_TOKENS = 1024;
const $ = (id) => document.getElementById(id);
const log = $("log");
const prompt = $("prompt");
const send = $("send");
const stop = $("stop");
const model = $("model");
const systemPrompt = $("system-prompt");
const temperature = $("temperature");

let conversation = null; // the open conversation's settings, as the API returns them
let messages = []; // its saved messages, in order
// The exchange in flight or failed: {question, replaceFrom, base, noCache, text,
// requested, streaming, error}; `base` is the saved messages it follows.
let pending = null;
let replyElement = null;
let renderQueued = false;

const sidebar = new Sidebar($("conversations"), $("conversations-empty"), {
  open: (id) => openConversation(id),
  rename: async (id, title) => {
    await guarded(() => conversations.change(id, { title }));
    if (conversation && conversation.id === id) setTitle(title);
    await refreshList();
  },
  remove: async (id) => {
    await guarded(() => conversations.remove(id));
    if (conversation && conversation.id === id) newConversation();
    await refreshList();
  },
});
const socket = new ChatSocket(onEvent, onConnection);

// --- the log ---------------------------------------------------------------------------

function render() {
  const elements = messages.map((message) => (message.role === "user"
    ? userMessage(message.content) : assistantMessage(message)));
  messages.forEach((message, index) => { elements[index].dataset.id = message.id ?? ""; });
  replyElement = null;
  if (pending) {
    elements.length = pending.base.length;
    elements.push(userMessage(pending.question));
    if (pending.streaming || pending.text) {
      replyElement = assistantMessage({ content: pending.text }, false);
      elements.push(replyElement);
    }
    if (pending.error) elements.push(errorMessage(pending.error, retryable(pending)));
  }
  log.replaceChildren(...elements);
  offerActions(elements);
  log.scrollTop = log.scrollHeight;
}

// Edit on the last question and Regenerate on the last reply, once both are saved.
function offerActions(elements) {
  if (pending) return;
  const last = messages.length - 1;
  if (last < 1 || messages[last].role !== "assistant" || !messages[last - 1].id) return;
  const question = messages[last - 1];
  const asked = elements[last - 1];
  addActions(asked, [{ label: "Edit", run: () => editQuestion(asked, question) }]);
  // A reply kept for a similar question is asked afresh (the caches would hand it back
  // again); a deterministic question's own cached reply is what the model would say.
  const afresh = messages[last].cache === "hit-semantic";
  addActions(elements[last], [
    { label: "Regenerate", run: () => ask(question.content, question.id, null, afresh) },
  ]);
}

function editQuestion(element, question) {
  questionEditor(element, question.content, (text) => ask(text, question.id), () => {
    render();
    prompt.focus();
  });
}

function retryable(exchange) {
  return () => ask(exchange.question, exchange.replaceFrom, exchange.base, exchange.noCache);
}

function showReply() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    if (!replyElement || !pending) return;
    updateReply(replyElement, pending.text);
    log.scrollTop = log.scrollHeight;
  });
}

// Send needs an open socket and no reply on its way; the page starts with it disabled, so
// nothing is sent before this script runs.
function updateControls() {
  const active = Boolean(pending && pending.streaming);
  send.disabled = active || !socket.isOpen;
  stop.disabled = !active;
  log.setAttribute("aria-busy", String(active));
}

// --- asking ----------------------------------------------------------------------------

// Send a question; `replaceFrom` is the saved question it replaces (edit, regenerate).
let creating = false; // a first question is making its conversation: a second waits

async function ask(question, replaceFrom = null, base = null, noCache = false) {
  if ((pending && pending.streaming) || creating) return false;
  if (!socket.isOpen) {
    notice("Not connected yet: the page reconnects by itself; send again in a moment.");
    return false;
  }
  if (!conversation) {
    creating = true;
    const created = await guarded(() => conversations.create(currentSettings()));
    creating = false;
    if (!created) return false;
    adopt(created, []);
    refreshList();
  }
  const upTo = replaceFrom === null ? -1 : messages.findIndex((m) => m.id === replaceFrom);
  const before = base || (upTo >= 0 ? messages.slice(0, upTo) : messages);
  pending = { question, replaceFrom, base: before, noCache, text: "", requested: model.value,
    streaming: true, error: null };
  render();
  const message = {
    type: "chat", conversation: conversation.id, model: model.value,
    max_tokens: MAX_TOKENS, messages: wireMessages(before, question),
  };
  if (replaceFrom !== null) message.replace_from = replaceFrom;
  if (noCache) message.no_cache = true;
  const heat = temperatureValue();
  if (heat !== null) message.temperature = heat;
  updateControls();
  socket.send(message);
  return true;
}

function wireMessages(before, question) {
  const system = systemPrompt.value.trim()
    ? [{ role: "system", content: systemPrompt.value }] : [];
  // Text turns only: a conversation that called tools over the socket keeps its calls and
  // their results (docs/websocket.md); the page shows a result as it shows a reply, and
  // never sends them again (the page offers no tools).
  const earlier = before.filter((m) => m.content && (m.role === "user" || m.role === "assistant"))
    .map(({ role, content }) => ({ role, content }));
  return [...system, ...earlier, { role: "user", content: question }];
}

function onEvent(event) {
  if (event.type === "delta") {
    if (pending && pending.streaming) {
      pending.text += event.content;
      showReply();
    }
  } else if (event.type === "done" || event.type === "stopped") {
    finished(event);
  } else if (event.type === "quota") {
    $("quota").textContent = quotaText(event.limits);
  } else if (event.type === "error") {
    failed(event);
  }
}

function finished(event) {
  if (!pending) return;
  const reply = {
    id: event.message_id, role: "assistant", content: pending.text, model: event.model,
    requested: pending.requested, prompt_tokens: event.usage.prompt_tokens,
    completion_tokens: event.usage.completion_tokens, cache: event.cache,
    cost_micros: event.cost_micros, ttft_ms: event.ttft_ms, stopped: event.type === "stopped",
  };
  const question = { id: event.user_message_id, role: "user", content: pending.question };
  $("usage").textContent = usageText(event, reply);
  messages = [...pending.base, question, reply];
  pending = null;
  updateControls();
  render();
  refreshList(); // the first question names the conversation; the latest goes first
}

function failed(event) {
  if (pending && pending.streaming) {
    pending.streaming = false;
    pending.error = event;
    updateControls();
    render();
  } else {
    log.append(errorMessage(event, null));
    log.scrollTop = log.scrollHeight;
  }
}

// --- the socket's state ----------------------------------------------------------------

function onConnection({ state, delayMs }) {
  updateControls();
  const banner = $("connection");
  if (state === "open") {
    banner.hidden = true;
    return;
  }
  banner.hidden = false;
  if (state === "lost") {
    banner.className = "lost";
    banner.textContent = `Connection lost. Reconnecting in ${Math.round(delayMs / 1000)} s…`;
    if (pending && pending.streaming) {
      // The server stops a reply whose socket closed, and keeps what was made of it.
      pending.streaming = false;
      pending.error = { error: { code: "connection_lost",
        message: "The connection dropped during the reply; what arrived is shown." } };
      updateControls();
      render();
    }
    return;
  }
  banner.className = "ok";
  banner.textContent = "Reconnected.";
  setTimeout(() => { if ($("connection").className === "ok") banner.hidden = true; }, 4000);
  if (conversation && pending && pending.error && pending.error.error.code === "connection_lost") {
    openConversation(conversation.id); // what the server kept of the cut reply
  }
}

// --- conversations ---------------------------------------------------------------------

function currentSettings() {
  return {
    model: model.value, system_prompt: systemPrompt.value, temperature: temperatureValue(),
  };
}

function temperatureValue() {
  const text = temperature.value.trim();
  if (text === "") return null;
  const value = Number(text);
  return Number.isFinite(value) ? value : null;
}

function adopt(found, saved) {
  conversation = found;
  messages = saved;
  pending = null;
  setTitle(found.title);
  if (found.model && [...model.options].some((option) => option.value === found.model)) {
    model.value = found.model;
  }
  systemPrompt.value = found.system_prompt;
  temperature.value = found.temperature === null ? "" : String(found.temperature);
  const url = new URL(location.href);
  url.searchParams.set("c", found.id);
  history.replaceState(null, "", url);
  sidebar.select(found.id);
}

async function openConversation(id) {
  if (pending && pending.streaming) socket.send({ type: "stop" });
  const found = await guarded(() => conversations.get(id));
  if (!found) return;
  const { messages: saved, ...settings } = found;
  adopt(settings, saved);
  updateControls();
  render();
  closeSidebar();
  prompt.focus();
}

function newConversation() {
  if (pending && pending.streaming) socket.send({ type: "stop" });
  conversation = null;
  messages = [];
  pending = null;
  systemPrompt.value = "";
  temperature.value = "";
  setTitle("New conversation");
  $("usage").textContent = "";
  const url = new URL(location.href);
  url.searchParams.delete("c");
  history.replaceState(null, "", url);
  sidebar.select(null);
  updateControls();
  render();
  closeSidebar();
  prompt.focus();
}

function setTitle(title) {
  $("title").textContent = title;
  document.title = `${title} · Sluice chat`;
}

async function refreshList() {
  const found = await guarded(() => conversations.list());
  if (!found) return;
  sidebar.show(found.conversations);
  const open = conversation && found.conversations.find((item) => item.id === conversation.id);
  if (open) setTitle(open.title); // named after its first question once that is answered
}

async function saveSettings(changes) {
  if (!conversation) return;
  const saved = await guarded(() => conversations.change(conversation.id, changes));
  if (saved) conversation = { ...conversation, ...changes };
}

// An API call whose failure is told in the log rather than thrown; null when it failed.
async function guarded(call) {
  try {
    return await call();
  } catch (error) {
    if (error.status === 404) notice("That conversation does not exist (or is not yours).");
    else if (error.status === 409) notice(error.message); // a limit, and what to do about it
    else notice(`Could not reach your conversations: ${error.message}`);
    return null;
  }
}

function notice(text) {
  log.append(errorMessage({ error: { message: text } }, null));
  log.scrollTop = log.scrollHeight;
}

// --- the page's controls ---------------------------------------------------------------

function closeSidebar() {
  document.body.classList.remove("sidebar-open");
  $("toggle-sidebar").setAttribute("aria-expanded", "false");
}

function grow() {
  prompt.style.height = "auto";
  prompt.style.height = `${Math.min(prompt.scrollHeight, window.innerHeight * 0.4)}px`;
}

$("composer").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = prompt.value.trim();
  if (!text) return;
  if (await ask(text)) {
    prompt.value = "";
    grow();
  }
});
prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    if (!send.disabled) $("composer").requestSubmit();
  }
});
prompt.addEventListener("input", grow);
stop.addEventListener("click", () => socket.send({ type: "stop" }));
$("new").addEventListener("click", newConversation);
model.addEventListener("change", () => saveSettings({ model: model.value }));
systemPrompt.addEventListener("change", () => saveSettings({ system_prompt: systemPrompt.value }));
temperature.addEventListener("change", () => {
  if (temperature.value.trim() === "" || temperatureValue() !== null) {
    saveSettings({ temperature: temperatureValue() });
  }
});
$("toggle-settings").addEventListener("click", (event) => {
  const panel = $("settings");
  panel.hidden = !panel.hidden;
  event.currentTarget.setAttribute("aria-expanded", String(!panel.hidden));
  if (!panel.hidden) systemPrompt.focus();
});
$("toggle-sidebar").addEventListener("click", (event) => {
  const open = document.body.classList.toggle("sidebar-open");
  event.currentTarget.setAttribute("aria-expanded", String(open));
  if (open) $("new").focus();
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && document.body.classList.contains("sidebar-open")) {
    closeSidebar();
    $("toggle-sidebar").focus();
  }
});
window.addEventListener("online", () => socket.reconnectNow());

// --- start -----------------------------------------------------------------------------

socket.connect();
refreshList();
const asked = Number(new URL(location.href).searchParams.get("c"));
if (asked > 0) openConversation(asked);
else prompt.focus();
