// The chat socket (/ws/chat/, docs/websocket.md), reconnecting by itself: a lost socket
// is retried after 1, 2, 4... seconds (at most 15), and the page is told each step so it
// can say so.

const MAX_DELAY_MS = 15_000;

export class ChatSocket {
  // onEvent(message) for each server event; onStatus({state, delayMs}) with state
  // "open", "lost" (retrying in delayMs) or "reconnected".
  constructor(onEvent, onStatus) {
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.socket = null;
    this.failures = 0;
    this.wasOpen = false;
    this.retry = null;
  }

  get isOpen() {
    return this.socket !== null && this.socket.readyState === WebSocket.OPEN;
  }

  connect() {
    clearTimeout(this.retry);
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/chat/`);
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.onStatus({ state: this.wasOpen ? "reconnected" : "open" });
      this.wasOpen = true;
      this.failures = 0;
    });
    socket.addEventListener("message", (event) => {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch {
        return; // the server only sends JSON; anything else is not ours to act on
      }
      this.onEvent(message);
    });
    socket.addEventListener("close", () => {
      if (this.socket !== socket) return;
      const delayMs = Math.min(1000 * 2 ** this.failures, MAX_DELAY_MS);
      this.failures += 1;
      this.onStatus({ state: "lost", delayMs });
      this.retry = setTimeout(() => this.connect(), delayMs);
    });
  }

  // Now, if the network came back: the browser says so before the timer would.
  reconnectNow() {
    if (!this.isOpen && this.socket && this.socket.readyState === WebSocket.CLOSED) {
      this.connect();
    }
  }

  send(message) {
    if (!this.isOpen) return false;
    this.socket.send(JSON.stringify(message));
    return true;
  }
}
