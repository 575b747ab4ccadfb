// The web chat: one WebSocket (session auth), protocol in docs/websocket.md.
(() => {
  const log = document.getElementById("log");
  const prompt = document.getElementById("prompt");
  const send = document.getElementById("send");
  const stop = document.getElementById("stop");
  const usage = document.getElementById("usage");
  const quota = document.getElementById("quota");
  const LIMIT_NAMES = {
    requests_per_minute: "requests this minute",
    tokens_per_minute: "tokens this minute",
    tokens_per_month: "tokens this month",
  };

  function remainingText(item) {
    if (item.limit === "budget_per_month_micros") {
      return `$${(item.remaining / 1e6).toFixed(2)} budget this month`;
    }
    return `${item.remaining.toLocaleString("en")} ${LIMIT_NAMES[item.limit] || item.limit}`;
  }

  let history = [];
  let reply = null;
  let socket = null;

  function bubble(role, text) {
    const div = document.createElement("div");
    div.className = `message ${role}`;
    div.textContent = text;
    log.appendChild(div);
    log.scrollTop = log.scrollHeight;
    return div;
  }

  function streaming(active) {
    send.disabled = active;
    stop.disabled = !active;
  }

  function showQuota(limits) {
    const bounded = limits.filter((item) => item.remaining !== null);
    quota.textContent = bounded.length === 0 ? "Quota: unlimited"
      : `Remaining: ${bounded.map(remainingText).join(" · ")}`;
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/chat/`);
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "delta" && reply) {
        reply.textContent += message.content;
        log.scrollTop = log.scrollHeight;
      } else if (message.type === "done" || message.type === "stopped") {
        history.push({ role: "assistant", content: reply ? reply.textContent : "" });
        const u = message.usage;
        const cached = message.cache && (message.cache.startsWith("hit") ||
          message.cache === "coalesced") ? ` · answered without the GPU (${message.cache})` : "";
        usage.textContent = `${message.type === "stopped" ? "Stopped. " : ""}` +
          `Tokens: ${u.prompt_tokens} in, ${u.completion_tokens} out${cached}`;
        reply = null;
        streaming(false);
      } else if (message.type === "quota") {
        showQuota(message.limits);
      } else if (message.type === "error") {
        bubble("error", message.error.message);
        reply = null;
        streaming(false);
      }
    };
    socket.onclose = () => { streaming(false); setTimeout(connect, 1000); };
  }

  document.getElementById("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = prompt.value.trim();
    if (!text || socket.readyState !== WebSocket.OPEN) return;
    history.push({ role: "user", content: text });
    bubble("user", text);
    reply = bubble("assistant", "");
    prompt.value = "";
    streaming(true);
    socket.send(JSON.stringify({
      type: "chat", model: document.getElementById("model").value,
      messages: history, max_tokens: 256,
    }));
  });
  stop.addEventListener("click", () => socket.send(JSON.stringify({ type: "stop" })));
  document.getElementById("new").addEventListener("click", () => {
    history = [];
    log.replaceChildren();
    usage.textContent = "";
  });
  connect();
})();
