// The inspector's tree: the selected object's value drawn member by member, folded and paged, with inline
// editors and array buttons for a user who may write.

import { $, compareIds, describe, noteRevision, state } from "./page.js";
import { select } from "./object.js";

const MAX_CHILDREN = 200;       // members or elements shown per tree node
const MAX_STRING = 400;         // characters of a string shown in the tree
const FOLDED_CHILDREN = 50;     // a container with more members or elements than this starts folded

export function showTreeMessage(text) {
  const message = document.createElement("p");
  message.className = "empty";
  message.textContent = text;
  $("tree").replaceChildren(message);
}

export function renderTree(changedPaths) {
  const value = state.value;
  if (value === null || typeof value !== "object") { showTreeMessage("no value"); return; }
  const keys = Object.keys(value);
  if (keys.length === 0) { showTreeMessage("an empty object: add values with set"); return; }
  const list = document.createElement("ul");
  for (const key of keys.sort()) list.append(treeNode(key, "key", value[key], key, changedPaths));
  $("tree").replaceChildren(list);
  // An editor the user has open survives a change elsewhere in the object (its text and error kept).
  const open = state.inline;
  if (open !== null) {
    const item = [...$("tree").querySelectorAll("li[data-path]")].find((node) => node.dataset.path === open.node);
    if (item && state.writable) editInline(item, open.path, open.value, open.op, { restored: open }); else state.inline = null;
  }
}

/** One member or element: its label, its value (scalars) or its children (objects and arrays). A label is a
 * button that puts its key path (without the object) into the forms that ask for one. */
function treeNode(label, labelClass, value, path, changedPaths) {
  const item = document.createElement("li");
  item.dataset.path = path;
  if (changedPaths.has(path)) item.classList.add("changed");
  const name = document.createElement("span");
  name.className = labelClass;
  name.textContent = label;
  name.title = `use the key path ${path}`;
  name.addEventListener("click", () => useKeyPath(path));
  item.append(name);
  if (isReference(value)) {
    const link = valueSpan(`→ ${value.$ref}`, "ref");
    link.title = `a reference: open '${value.$ref}'`;
    link.addEventListener("click", () => select(value.$ref));
    item.append(link);
  } else if (Array.isArray(value) || (value !== null && typeof value === "object")) {
    const entries = Array.isArray(value) ? value.map((element, index) => [String(index), element]) : Object.entries(value).sort(([a], [b]) => compareIds(a, b));
    const folded = state.folded.get(path) ?? entries.length > FOLDED_CHILDREN;
    const summary = document.createElement("button");
    summary.type = "button";
    summary.className = "summary";
    summary.textContent = `${folded ? "▸" : "▾"} ${Array.isArray(value) ? `[${value.length}]` : `{${entries.length}}`}`;
    summary.title = folded ? "unfold" : "fold";
    summary.setAttribute("aria-expanded", String(!folded));
    summary.addEventListener("click", () => { state.folded.set(path, !folded); renderTree(new Set()); });
    item.append(summary, copyButton(value));
    if (Array.isArray(value) && state.writable) item.append(treeAction("+ append", "append an element", () => editInline(item, path, undefined, "insert")));
    if (folded) return item;
    const children = document.createElement("ul");
    const shown = state.shown.get(path) ?? MAX_CHILDREN;
    for (const [childLabel, child] of entries.slice(0, shown)) {
      const node = treeNode(childLabel, Array.isArray(value) ? "index" : "key", child, `${path}.${childLabel}`, changedPaths);
      if (Array.isArray(value) && state.writable) {
        const index = Number(childLabel);
        node.append(treeAction("+ before", "insert an element before this one",
                               () => editInline(node, path, undefined, "insert", { index })));
        node.append(treeAction("×", "remove this element", () => writeFromTree(node, () => state.client.remove(state.selected, path, [index]))));
      }
      children.append(node);
    }
    if (entries.length > shown) {
      // Paged: the next MAX_CHILDREN on a click.
      const more = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "more";
      button.textContent = `show ${Math.min(MAX_CHILDREN, entries.length - shown)} more of ${entries.length - shown}`;
      button.addEventListener("click", () => { state.shown.set(path, shown + MAX_CHILDREN); renderTree(new Set()); });
      more.append(button);
      children.append(more);
    }
    item.append(children);
  } else {
    const span = scalarSpan(value);
    if (state.writable) {
      span.title = `${span.title ? `${span.title}; ` : ""}double-click to edit`;
      span.addEventListener("dblclick", () => editInline(item, path, value, "set"));
    }
    item.append(span);
  }
  return item;
}

/** A small button in the tree. */
function treeAction(text, title, action) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "tree-action";
  button.textContent = text;
  button.title = title;
  button.addEventListener("click", action);
  return button;
}

/** The JSON types an inline editor offers, and how each reads its text. */
const EDIT_TYPES = {
  string: (text) => text,
  number: (text) => {
    const number = Number(text);
    if (text.trim() === "" || !Number.isFinite(number)) throw new Error(`“${text}” is not a number`);
    return number;
  },
  boolean: (text) => {
    if (text !== "true" && text !== "false") throw new Error("a boolean is true or false");
    return text === "true";
  },
  null: () => null,
  JSON: (text) => JSON.parse(text),
};

function typeOf(value) {
  if (value === null) return "null";
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") return typeof value;
  return "JSON";
}

/** An editor in place of a tree node's value: a type and a text, checked before anything is sent. `set`
 * writes the value at `path`; `insert` puts it into the array at `path`, at `index` (before that element) or
 * at the end. The server's refusal stays at the field until the user acts again; Escape cancels. */
function editInline(item, path, value, op, { index, restored = null } = {}) {
  if (item.querySelector(":scope > .inline-edit")) return;
  const open = restored ?? { node: item.dataset.path, path, op, value, index, type: null, text: null, error: "" };
  state.inline = open;
  const form = document.createElement("form");
  form.className = "inline-edit";
  const type = document.createElement("select");
  type.setAttribute("aria-label", "type");
  for (const name of Object.keys(EDIT_TYPES)) type.append(new Option(name, name));
  type.value = value === undefined ? "string" : typeOf(value);
  const input = document.createElement("input");
  input.setAttribute("aria-label", "value");
  input.value = value === undefined ? "" : type.value === "string" ? value : JSON.stringify(value);
  const save = document.createElement("button");
  save.type = "submit";
  save.textContent = op !== "insert" ? "Save" : open.index === undefined ? "Append" : "Insert";
  const close = () => { form.remove(); if (state.inline === open) state.inline = null; };
  const cancel = treeAction("Cancel", "leave it as it is", close);
  const error = document.createElement("p");
  error.className = "error";
  error.setAttribute("role", "alert");
  if (open.type !== null) type.value = open.type;
  if (open.text !== null) input.value = open.text;
  error.textContent = open.error;
  form.append(type, input, save, cancel, error);
  const showError = (text) => { error.textContent = text; open.error = text; };
  const edited = () => { showError(""); open.type = type.value; open.text = input.value; };
  input.addEventListener("input", edited);
  type.addEventListener("change", edited);
  form.addEventListener("keydown", (event) => { if (event.key === "Escape") close(); });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let parsed;
    open.type = type.value;
    open.text = input.value;
    try {
      parsed = EDIT_TYPES[type.value](input.value);
    } catch (problem) {
      showError(problem.message);
      return;
    }
    try {
      // Closed first: the change's own event re-renders the tree, and must not bring the editor back.
      if (state.inline === open) state.inline = null;
      const reply = op === "insert" ? await state.client.insert(state.selected, path, [parsed], open.index)
                                    : await state.client.set(state.selected, path, parsed);
      noteRevision(reply.rev);
      form.remove();
    } catch (refusal) {
      state.inline = open;
      showError(describe(refusal));
      // The tree may have been drawn again meanwhile: show the refusal in the editor that is on screen.
      if (!form.isConnected) renderTree(new Set());
    }
  });
  item.append(form);
  input.focus();
}

/** Runs a write a tree button asked for; a refusal is shown at that node. */
async function writeFromTree(node, write) {
  node.querySelector(":scope > .error")?.remove();
  try {
    noteRevision((await write()).rev);
  } catch (refusal) {
    const error = document.createElement("p");
    error.className = "error";
    error.setAttribute("role", "alert");
    error.textContent = describe(refusal);
    node.append(error);
  }
}

/** A button that copies `value` as JSON (pretty-printed) to the clipboard. */
function copyButton(value) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "copy";
  button.textContent = "copy";
  button.title = "copy as JSON";
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(JSON.stringify(value, null, 2));
      button.textContent = "copied";
    } catch (error) {
      button.textContent = "copy refused";
    }
    setTimeout(() => { button.textContent = "copy"; }, 1500);
  });
  return button;
}

/** Puts `path` (a key path of the selected object) into every form that asks for one. */
function useKeyPath(path) {
  for (const id of ["edit-keypath", "subscribe-keypath"]) $(id).value = path;
}

function isReference(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value) &&
    Object.keys(value).length === 1 && typeof value.$ref === "string";
}

function scalarSpan(value) {
  if (value === null) return valueSpan("null", "null");
  if (typeof value === "string") {
    if (value.length <= MAX_STRING) return valueSpan(JSON.stringify(value), "string");
    // A long string is clipped; a click shows it whole (wrapped: it never widens the page), and clips it again.
    const span = valueSpan(clipped(value), "string clipped");
    span.title = "show it whole";
    span.addEventListener("click", () => {
      const whole = span.classList.toggle("whole");
      span.textContent = whole ? JSON.stringify(value) : clipped(value);
      span.title = whole ? "clip it" : "show it whole";
    });
    return span;
  }
  return valueSpan(String(value), typeof value);
}

function clipped(text) {
  return `${JSON.stringify(text.slice(0, MAX_STRING))}… (${text.length} characters: click to show all)`;
}

function valueSpan(text, kind) {
  const span = document.createElement("span");
  span.className = `value ${kind}`;
  span.textContent = text;
  return span;
}

/** Adds to `out` every path under `path` whose value differs between `before` and `after`. */
export function collectChangedPaths(before, after, path, out) {
  const container = (value) => value !== null && typeof value === "object" && !isReference(value);
  if (container(before) && container(after) && Array.isArray(before) === Array.isArray(after)) {
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    for (const key of keys) collectChangedPaths(before[key], after[key], `${path}.${key}`, out);
    if (Object.keys(before).length !== Object.keys(after).length) out.add(path);
  } else if (JSON.stringify(before) !== JSON.stringify(after)) {
    out.add(path);
  }
}
