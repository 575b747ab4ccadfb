// The conversations API (/chat/api/, docs/websocket.md "Conversations"): session login,
// Django's CSRF token on every write.

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

function csrfToken() {
  // The page's own forms carry it (the logout form), so it works with an HttpOnly cookie.
  const field = document.querySelector("input[name=csrfmiddlewaretoken]");
  return field ? field.value : "";
}

async function call(method, path, body) {
  const response = await fetch(`/chat/api/${path}`, {
    method,
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  let data = null;
  try {
    data = await response.json();
  } catch {
    // not JSON: a proxy's error page, say; the status tells
  }
  if (!response.ok) {
    const message = data && data.error ? data.error.message : `HTTP ${response.status}`;
    throw new ApiError(message, response.status);
  }
  return data;
}

export const conversations = {
  list: () => call("GET", "conversations/"),
  create: (settings) => call("POST", "conversations/", settings),
  get: (id) => call("GET", `conversations/${id}/`),
  change: (id, changes) => call("PATCH", `conversations/${id}/`, changes),
  remove: (id) => call("DELETE", `conversations/${id}/`),
};
