// The inspector's selected object: its value kept current, its time to live, deletion, editing it whole as
// JSON, and the Change form.

import { $, POLL_INTERVAL, clearMessages, describe, noteRevision, rights, state } from "./page.js";
import { noteDeleted } from "./object-list.js";
import { collectChangedPaths, renderTree, showTreeMessage } from "./tree.js";

// ---- The selected object -----------------------------------------------------------------------------------

export async function select(id) {
  unselect();
  clearMessages();
  state.selected = id;
  $("object-title").textContent = id;
  for (const item of $("object-list").children) item.classList.toggle("selected", item.dataset.id === id);
  showObjectControls(true);
  // Write controls only where the user may write: the server says, the page does not guess.
  rights([id]).then((answer) => {
    if (state.selected !== id) return;
    const allowed = answer.rights[id] ?? [];
    state.writable = allowed.includes("write");
    $("edit-form").hidden = !state.writable;
    $("delete-object").hidden = !state.writable;
    $("edit-json").hidden = !state.writable;
    renderTree(new Set());
  }).catch(() => {});
  let reply;
  try {
    reply = await state.client.request("get", { object: id });
  } catch (error) {
    if (state.selected === id) showTreeMessage(describe(error));
    return;
  }
  if (state.selected !== id) return;
  noteRevision(reply.rev);
  state.value = reply.value;
  state.changedRev = reply.changedRev;
  showExpiry(reply.expiresAt);
  renderTree(new Set());
  for (const key of Object.keys(reply.value)) observeKey(id, key);
  // A key added later is found by reading the object again (kvod observes key paths, not whole objects).
  state.keyCheckTimer = setInterval(() => checkKeys(id), POLL_INTERVAL);
}

/** The Delete button and the forms that act on the selected object: shown only while one is selected. */
function showObjectControls(shown) {
  for (const form of ["edit-form", "subscribe-form"]) $(form).hidden = !shown;
  $("delete-object").hidden = !shown;
  $("edit-json").hidden = !shown;
  $("json-form").hidden = true;
}

/** The selected object's time to live (`get`'s `expiresAt`, ms since 1970): a countdown beside its name, kept
 * current every second; each read of the object (every few seconds) brings the deadline a write or touch moved. */
function showExpiry(expiresAt) {
  clearInterval(state.expiryTimer);
  const element = $("object-expiry");
  element.hidden = typeof expiresAt !== "number";
  if (element.hidden) return;
  const tick = () => {
    const seconds = Math.max(0, Math.ceil((expiresAt - Date.now()) / 1000));
    element.textContent = `expires in ${seconds} s`;
    element.title = `time to live: deleted at ${new Date(expiresAt).toISOString()} unless written or touched`;
  };
  tick();
  state.expiryTimer = setInterval(tick, 1000);
}

/** The selected object is gone (`cause`: "expired" when its time to live ended): say so, and take away what
 * could act on it. */
function showDeleted(id, cause) {
  showExpiry(undefined);
  const how = cause === "expired" ? "expired" : "deleted";
  showTreeMessage(`'${id}' ${how === "expired" ? "expired (its time to live ended)" : "was deleted"}`);
  $("object-title").textContent = `${id} (${how})`;
  showObjectControls(false);
  noteDeleted(id);
  unselect();
}

function unselect() {
  state.writable = false;
  state.inline = null;
  state.folded.clear();
  state.shown.clear();
  for (const observation of state.keyObservations.values()) observation.unsubscribe();
  state.keyObservations.clear();
  clearInterval(state.keyCheckTimer);
  clearInterval(state.expiryTimer);
  $("object-expiry").hidden = true;
  state.selected = null;
  state.value = null;
}

/** Keeps `state.value[key]` current through an observation of the top-level key (any change below it notifies). */
function observeKey(id, key) {
  const observation = state.client.observe(id, key, { options: ["new"] });
  state.keyObservations.set(key, observation);
  observation.ready.catch(() => state.keyObservations.delete(key));
  (async () => {
    for await (const change of observation) {
      if (state.selected !== id) return;
      noteRevision(change.rev);
      if (change.reason === "sourceDeleted") {
        showDeleted(id, change.cause);
        return;
      }
      // A signal is no value of the key (docs/protocol.md "Signals"): the events panel shows it.
      if (change.isPrior || change.reason === "signal") continue;
      const before = state.value[key];
      const after = applyChange(before, change);
      const changed = new Set();
      collectChangedPaths(before, after, key, changed);
      if (after === undefined || after === null && !(key in state.value)) delete state.value[key];
      else state.value[key] = after;
      renderTree(changed);
    }
  })().catch(() => {});
}

/** The value after `change`: kinds 2-4 carry only the affected elements of an array observed exactly. */
function applyChange(before, change) {
  if (change.kind === 1 || !Array.isArray(before)) return change.new;
  const array = [...before];
  const indexes = change.indexes ?? [];
  if (change.kind === 2) indexes.forEach((index, position) => array.splice(index, 0, change.new[position]));
  if (change.kind === 3) [...indexes].reverse().forEach((index) => array.splice(index, 1));
  if (change.kind === 4) indexes.forEach((index, position) => { array[index] = change.new[position]; });
  return array;
}

async function checkKeys(id) {
  if (state.selected !== id) return;
  let reply;
  try {
    reply = await state.client.request("get", { object: id });
  } catch (error) {
    if (error.code === "not_found" && state.selected === id) showDeleted(id);
    return;
  }
  if (state.selected !== id) return;
  showExpiry(reply.expiresAt);
  const changed = new Set();
  for (const key of Object.keys(reply.value)) {
    if (!state.keyObservations.has(key)) {
      observeKey(id, key);
      changed.add(key);
    }
  }
  if (changed.size > 0) {
    noteRevision(reply.rev);
    state.value = reply.value;
    renderTree(changed);
  }
}

$("delete-object").addEventListener("click", async () => {
  const id = state.selected;
  if (id === null || !confirm(`Delete '${id}'?`)) return;
  clearMessages();
  try {
    noteRevision((await state.client.delete(id)).rev);
    if (state.selected === id) showDeleted(id);
  } catch (error) {
    $("edit-error").textContent = describe(error);
  }
});

// ---- The whole object as JSON ------------------------------------------------------------------------------

/** Opens the selected object as JSON (its class kept apart), read afresh with the revision of its last change. */
$("edit-json").addEventListener("click", async () => {
  const id = state.selected;
  clearMessages();
  try {
    const reply = await state.client.request("get", { object: id });
    const { $class: className, ...values } = reply.value;
    state.jsonEdit = { id, className, changedRev: reply.changedRev };
    $("json-text").value = JSON.stringify(values, null, 2);
    $("json-form").hidden = false;
    $("json-text").focus();
  } catch (error) {
    $("edit-error").textContent = describe(error);
  }
});

$("json-cancel").addEventListener("click", () => { $("json-form").hidden = true; });
$("json-text").addEventListener("input", () => { $("json-error").textContent = ""; });

/** Saves the edited object in one batch: the object deleted and created again with the new values (its class
 * kept), only if it did not change since it was opened (`ifRev`): one revision, and observers of it see one
 * change, not a deletion. */
$("json-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const edit = state.jsonEdit;
  let values;
  try {
    values = JSON.parse($("json-text").value);
  } catch (error) {
    $("json-error").textContent = `not JSON: ${error.message}`;
    return;
  }
  if (values === null || typeof values !== "object" || Array.isArray(values)) {
    $("json-error").textContent = "an object's value is a JSON object: { … }";
    return;
  }
  const create = { op: "create", object: edit.id, values };
  if (edit.className !== undefined) create.class = edit.className;
  try {
    const reply = await state.client.batch([{ op: "delete", object: edit.id, ifRev: edit.changedRev }, create]);
    noteRevision(reply.rev);
    $("json-form").hidden = true;
    if (state.selected === edit.id) select(edit.id);
  } catch (error) {
    $("json-error").textContent = error.code === "conflict" && error.details.part === 0
      ? `'${edit.id}' changed since it was opened (at rev ${error.details.changedRev ?? "?"}): cancel and open it again`
      : describe(error);
  }
});

// ---- Changing values -----------------------------------------------------------------------------------------

$("edit-op").addEventListener("change", () => {
  const op = $("edit-op").value;
  $("edit-value").disabled = op === "remove";
  $("edit-index").placeholder = op === "remove" ? "indexes: 0,2" : op === "insert" ? "index (end)" : op === "replace" ? "index" : "—";
  $("edit-index").disabled = op === "set";
});
$("edit-op").dispatchEvent(new Event("change"));

$("edit-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  clearMessages();
  const op = $("edit-op").value;
  const keyPath = $("edit-keypath").value;
  let value;
  if (op !== "remove") {
    try {
      value = JSON.parse($("edit-value").value);
    } catch (error) {
      $("edit-error").textContent = `the value is not JSON (strings need quotes: "Oslo"): ${error.message}`;
      return;
    }
  }
  const indexText = $("edit-index").value.trim();
  const indexes = indexText === "" ? [] : indexText.split(",").map((part) => Number(part.trim()));
  if (indexes.some((index) => !Number.isInteger(index) || index < 0)) {
    $("edit-error").textContent = "indexes are non-negative integers, separated by commas";
    return;
  }
  const object = state.selected;
  try {
    let reply;
    if (op === "set") reply = await state.client.set(object, keyPath, value);
    else if (op === "insert") reply = await state.client.insert(object, keyPath, [value], indexes[0]);
    else if (op === "remove") reply = await state.client.remove(object, keyPath, indexes);
    else reply = await state.client.replace(object, keyPath, indexes[0], value);
    noteRevision(reply.rev);
    $("edit-result").textContent = `${op} ${keyPath}: done, rev ${reply.rev}`;
  } catch (error) {
    $("edit-error").textContent = describe(error);
  }
});
