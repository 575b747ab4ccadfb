// How the chat words figures and errors: quota, tokens, cost, latency, what went wrong.

const LIMIT_NAMES = {
  requests_per_minute: "requests this minute",
  tokens_per_minute: "tokens this minute",
  tokens_per_month: "tokens this month",
};

// A quota error's code is the limit's name (docs/api.md, "Errors").
const QUOTA_LIMITS = {
  requests_per_minute: "your team's requests per minute",
  tokens_per_minute: "your team's tokens per minute",
  tokens_per_month: "your team's tokens per month",
  budget_per_month: "your team's monthly budget",
  key_requests_per_minute: "this key's requests per minute",
  max_concurrent_requests: "your team's requests at once",
};

// Failures that pass by themselves: the page offers to try again.
const TRANSIENT = new Set([
  "no_healthy_worker", "queue_timeout", "upstream_error", "service_unavailable", "rate_limited",
]);

function remainingText(item) {
  if (item.limit === "budget_per_month_micros") {
    return `$${(item.remaining / 1e6).toFixed(2)} budget this month`;
  }
  return `${item.remaining.toLocaleString("en")} ${LIMIT_NAMES[item.limit] || item.limit}`;
}

export function quotaText(limits) {
  const bounded = limits.filter((item) => item.remaining !== null);
  return bounded.length === 0 ? "Quota: unlimited"
    : `Remaining: ${bounded.map(remainingText).join(" · ")}`;
}

export function costText(micros) {
  if (micros === null || micros === undefined) return "";
  if (micros === 0) return "$0";
  const dollars = micros / 1e6;
  return dollars < 0.01 ? `$${dollars.toPrecision(2)}` : `$${dollars.toFixed(4)}`;
}

export function servedByCache(cache) {
  return Boolean(cache) && (cache.startsWith("hit") || cache === "coalesced");
}

const CACHE_NAMES = {
  "hit-exact": "cached: same question",
  "hit-semantic": "cached: similar question",
  coalesced: "shared with an identical request",
};

export function cacheBadgeText(cache) {
  return CACHE_NAMES[cache] || `cached (${cache})`;
}

// The line under a reply: the model that answered (model "auto" names the one it chose),
// tokens, cost and time to first token.
export function figuresText(reply) {
  const parts = [];
  if (reply.model) {
    parts.push(reply.requested === "auto" ? `auto → ${reply.model}` : reply.model);
  }
  if (reply.prompt_tokens !== null && reply.prompt_tokens !== undefined) {
    parts.push(`${reply.prompt_tokens} in, ${reply.completion_tokens} out`);
  }
  const cost = costText(reply.cost_micros);
  if (cost) parts.push(cost);
  if (reply.ttft_ms !== null && reply.ttft_ms !== undefined) {
    parts.push(`first token ${reply.ttft_ms.toLocaleString("en")} ms`);
  }
  return parts.join(" · ");
}

// The status line after a reply (the words the page has always shown, then the rest).
export function usageText(event, reply) {
  const usage = event.usage;
  const cached = servedByCache(event.cache) ? ` · answered without the GPU (${event.cache})` : "";
  const cost = costText(event.cost_micros);
  const ttft = event.ttft_ms === null || event.ttft_ms === undefined ? ""
    : ` · first token ${event.ttft_ms} ms`;
  // context_trimmed: messages the socket left out to fit the model (docs/websocket.md).
  const trimmed = event.context_trimmed
    ? "Older messages were left out to fit the model's context window. " : "";
  return `${event.type === "stopped" ? "Stopped. " : ""}${trimmed}` +
    `Tokens: ${usage.prompt_tokens} in, ${usage.completion_tokens} out` +
    `${cost ? ` · ${cost}` : ""}${ttft}${cached}` +
    `${reply.requested === "auto" ? ` · auto chose ${event.model}` : ""}`;
}

export function countdownText(seconds) {
  const whole = Math.max(0, Math.ceil(seconds));
  const minutes = Math.floor(whole / 60);
  const rest = String(whole % 60).padStart(2, "0");
  return minutes >= 60
    ? `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`
    : `${minutes}:${rest}`;
}

// What a user can do about an error event: {title, detail, retryAfter, retry, quota}.
export function errorAdvice(event) {
  const error = event.error || {};
  const code = error.code || "";
  const retryAfter = typeof event.retry_after === "number" ? event.retry_after : null;
  const limit = QUOTA_LIMITS[code];
  if (limit) {
    return {
      quota: true,
      title: retryAfter === null
        ? `This message alone is over ${limit}: shorten it, or ask a team admin to raise the limit.`
        : `You have used up ${limit}.`,
      detail: error.message,
      retryAfter,
      retry: retryAfter !== null,
    };
  }
  if (code === "no_healthy_worker" || code === "queue_timeout") {
    return {
      title: "No model worker can take this message right now. Try again in a moment.",
      detail: error.message, retryAfter, retry: true,
    };
  }
  if (TRANSIENT.has(code)) {
    return { title: error.message, detail: "", retryAfter, retry: true };
  }
  if (code === "connection_lost") {
    return { title: error.message, detail: "", retryAfter: null, retry: false };
  }
  return { title: error.message || "Something went wrong.", detail: "", retryAfter, retry: false };
}
