// The list of the user's conversations: open, rename (in place), delete.

export class Sidebar {
  // handlers: {open(id), rename(id, title), remove(id)}, each may return a promise.
  constructor(list, empty, handlers) {
    this.list = list;
    this.empty = empty;
    this.handlers = handlers;
    this.current = null;
    this.items = [];
  }

  show(conversations) {
    this.items = conversations;
    this.list.replaceChildren(...conversations.map((item) => this.entry(item)));
    this.empty.hidden = conversations.length > 0;
  }

  select(id) {
    this.current = id;
    for (const li of this.list.children) {
      const chosen = Number(li.dataset.id) === id;
      li.classList.toggle("current", chosen);
      const open = li.querySelector(".open");
      // An entry being renamed has no button until the rename is saved; it is rebuilt
      // then, marked from `current`.
      if (!open) continue;
      if (chosen) open.setAttribute("aria-current", "page");
      else open.removeAttribute("aria-current");
    }
  }

  entry(item) {
    const li = document.createElement("li");
    li.dataset.id = item.id;
    li.classList.toggle("current", item.id === this.current);
    const open = document.createElement("button");
    open.type = "button";
    open.className = "open";
    open.textContent = item.title;
    open.title = item.title;
    if (item.id === this.current) open.setAttribute("aria-current", "page");
    open.addEventListener("click", () => this.handlers.open(item.id));
    const rename = iconButton("✎", `Rename “${item.title}”`, "rename");
    rename.addEventListener("click", () => this.editTitle(li, item));
    const remove = iconButton("×", `Delete “${item.title}”`, "delete");
    remove.addEventListener("click", () => {
      if (window.confirm(`Delete “${item.title}” and all its messages?`)) {
        this.handlers.remove(item.id);
      }
    });
    li.append(open, rename, remove);
    return li;
  }

  editTitle(li, item) {
    const input = document.createElement("input");
    input.value = item.title;
    input.maxLength = 200;
    input.setAttribute("aria-label", "New title");
    li.replaceChildren(input);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title && title !== item.title) {
        await this.handlers.rename(item.id, title);
      } else {
        li.replaceWith(this.entry(item));
      }
      const again = this.list.querySelector(`li[data-id="${item.id}"] .open`);
      if (again) again.focus();
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") { event.preventDefault(); finish(true); }
      if (event.key === "Escape") { event.preventDefault(); finish(false); }
    });
    input.addEventListener("blur", () => finish(true));
  }
}

function iconButton(symbol, label, className) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = `icon ${className}`;
  button.title = label;
  button.setAttribute("aria-label", label);
  button.textContent = symbol;
  return button;
}
