// kvod inspector: the page kvod serves at GET /. Built on the JavaScript client (/kvod.js), nothing else.
// Everything the server sends is shown through textContent, never parsed as HTML.
import { KVODClient, KVODError } from "/kvod.js";

const $ = (id) => document.getElementById(id);
const MAX_LISTED = 1000;        // object ids shown for a search
const PAGE_SIZE = 200;          // object ids per page of the list
const MAX_CHILDREN = 200;       // members or elements shown per tree node
const MAX_STRING = 400;         // characters of a string shown in the tree
const MAX_EVENTS = 500;         // event lines kept
const FOLDED_CHILDREN = 50;     // a container with more members or elements than this starts folded
const POLL_INTERVAL = 2000;     // list polling, when the server cannot observe object sets
const METRICS_INTERVAL = 2000;  // dashboard: /metrics read this often
const METRICS_KEPT = 60;        // dashboard: samples drawn per tile (two minutes)

const state = {
  client: null,
  revision: null,          // the server's revision as last seen (null: not yet)
  page: { after: null, ids: [], more: false, cursors: [] },  // the page of ids shown, and the cursors of those before
  search: null,            // the search being shown: its pattern observation and the ids matching
  selected: null,          // the selected object's id
  value: null,             // its value, as last read or changed
  keyObservations: new Map(),   // top-level key -> Observation that keeps `value` current
  keyCheckTimer: null,
  subscriptions: new Set(),
  eventCount: 0,
  eventsDropped: 0,        // event lines removed past MAX_EVENTS
  eventsHeld: [],          // events received while the log is paused, shown on resume
  eventsPaused: false,
  folded: new Map(),       // tree path -> folded (true) or unfolded (false) by the user; others by size
  shown: new Map(),        // tree path -> how many members or elements are shown (MAX_CHILDREN more per click)
  writable: false,         // whether the user may write the selected object (the server's `access`)
  inline: null,            // the open inline editor {path, op, value, type, text, error}: kept across re-renders
};

// ---- Start-up --------------------------------------------------------------------------------------------

async function start() {
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
  const client = new KVODClient(url, { client: "kvod-inspector" });
  state.client = client;
  client.on("state", showStatus);
  client.on("binding", (notice) => { noteRevision(notice.rev); loadSchema(); });
  try {
    await client.opened;
  } catch (error) {
    showStatus("closed");
    $("server").textContent = `cannot reach kvod: ${error.message}`;
    return;
  }
  showStatus(client.state);
  $("server").textContent = `${client.server.server} ${client.server.version}`;
  try {
    await client.request("list", { limit: 1 });
  } catch (error) {
    if (error.code === "unauthenticated") { showLogin(); return; }
    throw error;
  }
  startApp();
}

function showStatus(status) {
  const element = $("status");
  element.className = `status ${status}`;
  element.textContent = { open: "connected", connecting: "connecting…", reconnecting: "reconnecting…", closed: "disconnected" }[status] ?? status;
  // While the page is not connected what it shows may be stale, and nothing it sends would arrive: say so and
  // turn the forms off (a disabled fieldset disables every control in it, and gives each back as it was).
  const stale = status !== "open" && status !== "connecting";
  $("stale").hidden = !stale;
  $("app").classList.toggle("stale", stale);
  for (const fieldset of document.querySelectorAll("#app fieldset")) fieldset.disabled = stale;
  $("delete-object").disabled = stale;
  $("edit-json").disabled = stale;
  $("refresh-schema").disabled = stale;
}

function noteRevision(rev) {
  if (typeof rev === "number" && (state.revision === null || rev > state.revision)) {
    state.revision = rev;
    $("revision").textContent = `rev ${rev}`;
  }
}

function showLogin() {
  $("login").hidden = false;
  $("login-user").focus();
}

$("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  const token = $("login-token").value;
  const credentials = token ? { token } : { user: $("login-user").value, password: $("login-password").value };
  try {
    const reply = await state.client.auth(credentials);
    $("login").hidden = true;
    $("whoami").textContent = reply.user;
    $("log-out").hidden = false;
    startApp();
  } catch (error) {
    // The server says how many attempts this connection has left; at none it closes the connection.
    const left = error instanceof KVODError ? error.details.attemptsLeft : undefined;
    $("login-error").textContent = left === 0
      ? "Too many failed attempts: kvod closed the connection. Check the user and password, then try again."
      : describe(error);
  }
});

// Logging out forgets the credentials (they are only in this page's memory) by loading the page again.
$("log-out").addEventListener("click", () => {
  state.client.close();
  location.reload();
});

function startApp() {
  $("app").hidden = false;
  startObjectList();
  loadSchema();
  showCreateControls();
  startDashboard();
}

/** What the user may do on `objects` and anywhere, as the server says (`access`); everything for an older
 * server that does not know the operation (the server still refuses what the user may not do). */
async function rights(objects = []) {
  try {
    return await state.client.request("access", { objects });
  } catch (error) {
    if (error.code !== "unknown_op") throw error;
    return { anywhere: ["read", "write", "admin"], rights: Object.fromEntries(objects.map((id) => [id, ["read", "write", "admin"]])) };
  }
}

/** The New object form only for a user who may write some object; the users and the node's state only for a
 * server admin. */
async function showCreateControls() {
  const answer = await rights().catch(() => null);
  $("create-form").hidden = answer !== null && !answer.anywhere.includes("write");
  state.serverAdmin = answer?.serverAdmin === true;
  $("admin-views").hidden = !state.serverAdmin;
  if (state.serverAdmin) loadAdminViews();
}

/** For a server admin: every user with their rules and token ids (`userList`: never a hash), and this node's
 * state (`digest`: the revision, the digest of the stored state, and in cluster mode the stream position applied
 * and the integrity state, with the other nodes as their latest checkpoints describe them: `peers`). */
async function loadAdminViews() {
  try {
    const { users } = await state.client.request("userList");
    renderDefinitions($("users"), users, (user) => `${user.name} (${user.rules.length} rule${user.rules.length === 1 ? "" : "s"})`,
                      "no users: open mode (everything allowed, loopback only)");
  } catch (error) {
    $("users").replaceChildren(emptyItem(describe(error)));
  }
  try {
    const digest = await state.client.request("digest");
    const facts = [["revision", digest.rev], ["objects", digest.objects], ["digest", digest.digest]];
    if (digest.node !== undefined) {
      facts.unshift(["node", digest.node]);
      facts.push(["applied", digest.applied], ["integrity", digest.integrity]);
    }
    if (digest.chain) facts.push(["chain", digest.chain]);
    $("node").replaceChildren(...facts.flatMap(([name, value]) => {
      const term = document.createElement("dt");
      term.textContent = name;
      const detail = document.createElement("dd");
      detail.textContent = String(value);
      return [term, detail];
    }));
    renderPeers(digest.peers);
  } catch (error) {
    $("node").replaceChildren(emptyItem(describe(error)));
  }
}

/** The other cluster nodes (`digest`'s `peers`): hidden in single mode; "no checkpoint heard yet" until one is. */
function renderPeers(peers) {
  $("peers-view").hidden = peers === undefined;
  if (peers === undefined) return;
  const rows = peers.map((peer) => {
    const row = document.createElement("tr");
    row.dataset.node = peer.node;
    const verdict = peer.agrees === true ? "same chain" : peer.agrees === false ? "differs" : "not comparable";
    for (const [text, title] of [[peer.node], [String(peer.applied)], [peer.rev === undefined ? "–" : String(peer.rev)],
                                 [`${peer.chain.slice(0, 12)}…`, peer.chain], [verdict]]) {
      const cell = document.createElement("td");
      cell.textContent = text;
      if (title) cell.title = title;
      row.append(cell);
    }
    if (peer.agrees === false) row.lastChild.classList.add("differs");
    return row;
  });
  if (rows.length === 0) {
    const row = document.createElement("tr");
    const cell = document.createElement("td");
    cell.colSpan = 5;
    cell.textContent = "no checkpoint heard from another node yet";
    row.append(cell);
    rows.push(row);
  }
  $("peers").tBodies[0].replaceChildren(...rows);
}

// ---- The object list -------------------------------------------------------------------------------------
//
// Ids are read a page at a time with `list` (`limit` and `after`: the server pages them, so a store of millions
// is browsable), and kept current by one object-set observation of every id without its initial list (no
// cost up front, whatever the store's size): a creation or deletion within the page shows at once. A search
// is a pattern observation of its own, answered by the server (`order-*`; text without `*` matches ids that
// contain it), with its initial list and live changes.

async function startObjectList() {
  const observation = state.client.observe({ pattern: "*" }, undefined, { options: ["new"] });
  try {
    await observation.ready;
  } catch (error) {
    $("list-mode").textContent = "polling";
    $("list-mode").title = `live list unavailable (${describe(error)}); listing every ${POLL_INTERVAL / 1000} s`;
    await loadPage(state.page.after);
    pollObjectList();
    return;
  }
  $("list-mode").textContent = "live";
  $("list-mode").title = "kept current by an object-set observation";
  noteRevision(observation.rev);
  await loadPage(null);
  for await (const change of observation) {
    noteRevision(change.rev);
    if (change.reason === "created") noteCreated(change.object);
    else if (change.reason === "sourceDeleted") noteDeleted(change.object);
  }
}

async function pollObjectList() {
  if (state.search === null) await loadPage(state.page.after).catch(() => {});
  setTimeout(pollObjectList, POLL_INTERVAL);
}

/** Reads the page of ids after `after` (from the first with null). */
async function loadPage(after) {
  try {
    const reply = await state.client.request("list", after === null ? { limit: PAGE_SIZE } : { limit: PAGE_SIZE, after });
    state.page = { ...state.page, after, ids: reply.objects, more: reply.more };
    renderObjectList();
  } catch (error) {
    if (error.code !== "connection_lost") $("object-list-more").textContent = describe(error);
  }
}

/** Whether `id` falls within the page shown (between its cursor and its last id, or anywhere after the cursor
 * on the last page). */
function inPage(id) {
  const { after, ids, more } = state.page;
  return (after === null || compareIds(id, after) > 0) && (!more || ids.length === 0 || compareIds(id, ids[ids.length - 1]) < 0);
}

function noteCreated(id) {
  if (state.search !== null) {
    if (state.search.matches(id)) { state.search.ids.add(id); renderObjectList(id); }
    return;
  }
  if (inPage(id) && !state.page.ids.includes(id)) {
    state.page.ids = [...state.page.ids, id].sort(compareIds);
    renderObjectList(id);
  }
}

function noteDeleted(id) {
  state.search?.ids.delete(id);
  state.page.ids = state.page.ids.filter((listed) => listed !== id);
  renderObjectList();
}

$("page-next").addEventListener("click", () => {
  const { ids } = state.page;
  if (ids.length === 0) return;
  state.page.cursors.push(state.page.after);
  loadPage(ids[ids.length - 1]);
});

$("page-prev").addEventListener("click", () => {
  if (state.page.cursors.length > 0) loadPage(state.page.cursors.pop());
});

/** The search: a pattern observation answered by the server, started 300 ms after the last keystroke; with a
 * `where` expression, a live query (objects come and go as the expression starts or stops holding on them). */
let searchTimer = null;
for (const input of ["object-filter", "object-where"]) {
  $(input).addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(startSearch, 300);
  });
}

async function startSearch() {
  const text = $("object-filter").value.trim();
  const where = $("object-where").value.trim();
  state.search?.observation.unsubscribe();
  state.search = null;
  if (text === "" && where === "") { renderObjectList(); return; }
  const pattern = text === "" ? "*" : text.includes("*") ? text : `*${text}*`;
  const target = where === "" ? { pattern } : { pattern, where };
  const observation = state.client.observe(target, undefined, { options: ["initial"] });
  // A live query's set changes by `entered` and `left`: a created id is in it only when the server says so.
  const search = { text, pattern, where, observation, ids: new Set(), ready: false, error: null,
                   matches: (id) => where === "" && globMatches(pattern, id) };
  state.search = search;
  renderObjectList();
  try {
    await observation.ready;
  } catch (error) {
    if (state.search !== search) return;
    search.error = error.code === "too_large"
      ? `too many ids match “${pattern}” to list at once: narrow the search`
      : describe(error);
    renderObjectList();
    return;
  }
  for await (const change of observation) {
    if (state.search !== search) return;
    if (Array.isArray(change.ids)) {
      search.ids = new Set(change.ids);
      search.ready = true;
      renderObjectList();
    } else if (change.reason === "created" || change.reason === "initial" || change.reason === "entered") {
      search.ids.add(change.object);
      search.ready = true;
      renderObjectList(change.object);
    } else if (change.reason === "sourceDeleted" || change.reason === "left") {
      search.ids.delete(change.object);
      renderObjectList();
    }
  }
}

/** `*` matches any run of characters, as kvod's patterns do. */
function globMatches(pattern, id) {
  const parts = pattern.split("*").map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${parts.join(".*")}$`, "s").test(id);
}

function renderObjectList(justAdded) {
  const search = state.search;
  const ids = search !== null ? [...search.ids].sort(compareIds).slice(0, MAX_LISTED) : state.page.ids;
  const list = $("object-list");
  const items = ids.map((id) => {
    const item = document.createElement("li");
    item.textContent = id;
    item.dataset.id = id;
    item.title = id;
    if (id === state.selected) item.classList.add("selected");
    if (id === justAdded) item.classList.add("added");
    return item;
  });
  if (items.length === 0) {
    // Say why the list is empty and what to do, rather than show nothing.
    let text;
    if (search !== null) {
      text = search.error ?? (!search.ready ? "searching…"
        : search.where !== "" ? `No object${search.text === "" ? "" : ` matching “${search.pattern}”`} where ${search.where}.`
        : search.text.includes("*") ? `No id matches “${search.pattern}”.` : `No id contains “${search.text}”.`);
    } else {
      text = state.page.after === null ? "No objects yet: create one with the form below." : "No more ids.";
    }
    items.push(emptyItem(text));
  }
  list.replaceChildren(...items);
  const { after, more, cursors } = state.page;
  if (search !== null) {
    $("object-count").textContent = `${search.ids.size} found`;
    $("object-list-more").textContent = search.ids.size > MAX_LISTED ? `the first ${MAX_LISTED} shown: narrow the search` : "";
  } else {
    $("object-count").textContent = after === null && !more ? String(ids.length) : `page ${cursors.length + 1}`;
    $("object-list-more").textContent = "";
  }
  $("pager").hidden = search !== null || (after === null && !more);
  $("page-prev").disabled = cursors.length === 0;
  $("page-next").disabled = !more;
}

/** The protocol's order for ids (Swift String order, close to code point order). */
function compareIds(a, b) { return a < b ? -1 : a > b ? 1 : 0; }

$("object-list").addEventListener("click", (event) => {
  const id = event.target.closest("li")?.dataset.id;
  if (id !== undefined) select(id);
});

$("create-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  clearMessages();
  const id = $("create-id").value;
  let values = {};
  try {
    if ($("create-values").value.trim()) values = JSON.parse($("create-values").value);
  } catch (error) {
    $("create-error").textContent = `values are not JSON: ${error.message}`;
    return;
  }
  try {
    const reply = await state.client.create(id, values, $("create-class").value || undefined);
    noteRevision(reply.rev);
    noteCreated(id);
    $("create-id").value = "";
    $("create-values").value = "";
    select(id);
  } catch (error) {
    $("create-error").textContent = describe(error);
  }
});

// ---- The selected object -----------------------------------------------------------------------------------

async function select(id) {
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

/** Clears every error and result line: a message belongs to the action that produced it, not to the next one. */
function clearMessages() {
  for (const element of document.querySelectorAll("#app .error, #app .result")) element.textContent = "";
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
      if (change.isPrior) continue;
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

// ---- The tree ----------------------------------------------------------------------------------------------

function showTreeMessage(text) {
  const message = document.createElement("p");
  message.className = "empty";
  message.textContent = text;
  $("tree").replaceChildren(message);
}

function renderTree(changedPaths) {
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
function collectChangedPaths(before, after, path, out) {
  const container = (value) => value !== null && typeof value === "object" && !isReference(value);
  if (container(before) && container(after) && Array.isArray(before) === Array.isArray(after)) {
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    for (const key of keys) collectChangedPaths(before[key], after[key], `${path}.${key}`, out);
    if (Object.keys(before).length !== Object.keys(after).length) out.add(path);
  } else if (JSON.stringify(before) !== JSON.stringify(after)) {
    out.add(path);
  }
}

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

// ---- Observing ---------------------------------------------------------------------------------------------

$("subscribe-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  clearMessages();
  const object = state.selected;
  const keyPath = $("subscribe-keypath").value;
  const options = [...document.querySelectorAll("#subscribe-form input[name=option]:checked")].map((box) => box.value);
  const observation = state.client.observe(object, keyPath, { options });
  try {
    await observation.ready;
  } catch (error) {
    $("subscribe-error").textContent = describe(error);
    return;
  }
  const chip = document.createElement("li");
  chip.textContent = `#${observation.sub} ${object} ${keyPath} [${options.join(", ")}]`;
  const remove = document.createElement("button");
  remove.type = "button";
  remove.textContent = "×";
  remove.title = "unobserve";
  remove.addEventListener("click", () => { observation.unsubscribe(); chip.remove(); });
  chip.append(remove);
  $("subscriptions").append(chip);
  $("events-head").hidden = false;
  for await (const change of observation) {
    noteRevision(change.rev);
    showEvent(change);
  }
  chip.remove();
});

function showEvent(change) {
  state.eventCount += 1;
  if (state.eventsPaused) {
    state.eventsHeld.push({ change, at: new Date() });
    showEventCount();
    return;
  }
  appendEvent(change, new Date());
  showEventCount();
}

/** The count of events received, with those held while paused and those dropped past the cap. */
function showEventCount() {
  const notes = [];
  if (state.eventsHeld.length > 0) notes.push(`${state.eventsHeld.length} held`);
  if (state.eventsDropped > 0) notes.push(`${state.eventsDropped} dropped past ${MAX_EVENTS}`);
  $("event-count").textContent = state.eventCount === 0 ? "" : `${state.eventCount}${notes.length ? ` (${notes.join(", ")})` : ""}`;
}

function appendEvent(change, at) {
  const line = document.createElement("li");
  line.dataset.text = `${change.object} ${change.keyPath} ${change.reason}`;
  const time = document.createElement("time");
  time.dateTime = at.toISOString();
  time.textContent = at.toTimeString().slice(0, 8) + "." + String(at.getMilliseconds()).padStart(3, "0");
  line.append(time, " ");
  const parts = [`rev ${change.rev}`, `${change.object} ${change.keyPath}`];
  const reason = document.createElement("span");
  reason.className = `reason ${change.reason}`;
  reason.textContent = change.reason;
  line.append(`${parts.join(" · ")} · `, reason);
  let detail = ` · kind ${change.kind}`;
  if (change.indexes) detail += ` · indexes ${change.indexes.join(",")}`;
  if ("new" in change) detail += ` · new ${abbreviate(change.new)}`;
  if ("old" in change) detail += ` · old ${abbreviate(change.old)}`;
  line.append(detail);
  if (change.isPrior) {
    const prior = document.createElement("span");
    prior.className = "prior";
    prior.textContent = " · prior";
    line.append(prior);
  }
  line.hidden = !matchesEventFilter(line);
  const list = $("events");
  list.prepend(line);
  while (list.children.length > MAX_EVENTS) {
    list.lastElementChild.remove();
    state.eventsDropped += 1;
  }
}

/** Whether an event line matches the filter (every word, in its object, key path or reason). */
function matchesEventFilter(line) {
  const words = $("event-filter").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const text = line.dataset.text.toLowerCase();
  return words.every((word) => text.includes(word));
}

$("event-filter").addEventListener("input", () => {
  for (const line of $("events").children) line.hidden = !matchesEventFilter(line);
});

$("pause-events").addEventListener("click", () => {
  state.eventsPaused = !state.eventsPaused;
  $("pause-events").textContent = state.eventsPaused ? "Resume" : "Pause";
  $("pause-events").setAttribute("aria-pressed", String(state.eventsPaused));
  if (!state.eventsPaused) {
    for (const { change, at } of state.eventsHeld) appendEvent(change, at);
    state.eventsHeld = [];
  }
  showEventCount();
});

$("clear-events").addEventListener("click", () => {
  $("events").replaceChildren();
  state.eventCount = 0;
  state.eventsDropped = 0;
  state.eventsHeld = [];
  showEventCount();
});

function abbreviate(value) {
  const text = JSON.stringify(value) ?? "undefined";
  return text.length > 200 ? `${text.slice(0, 200)}… (${text.length} bytes)` : text;
}

// ---- The dashboard (from /metrics) --------------------------------------------------------------------------

/** The tiles: a title, how to read a figure from two samples of /metrics (`now`, `before`, seconds between), and
 * how to show it. Counters become rates; histograms' sums and counts become mean durations. */
const TILES = [
  { id: "connections", title: "connections", read: (now) => now.sum("kvod_connections"), show: String },
  { id: "requests", title: "requests/s", read: (now, before, dt) => rate(now, before, dt, "kvod_requests_total"), show: perSecond },
  { id: "events", title: "events/s", read: (now, before, dt) => rate(now, before, dt, "kvod_events_sent_total"), show: perSecond },
  { id: "loop", title: "loop iteration", read: (now, before) => meanDuration(now, before, "kvod_loop_iteration_seconds"), show: duration },
  { id: "commit", title: "group commit", read: (now, before) => meanDuration(now, before, "kvod_group_commit_seconds"), show: duration },
  { id: "memory", title: "memory (RSS)", read: (now) => now.sum("process_resident_memory_bytes"), show: bytes },
  { id: "stored", title: "stored", read: (now) => now.sum("kvod_stored_bytes"), show: bytes },
  { id: "objects", title: "objects", read: (now) => now.sum("kvod_objects"), show: String },
  { id: "sessions", title: "presence sessions", read: (now) => now.sum("kvod_sessions"), show: String },
  { id: "storage", title: "storage", read: (now) => now.sum("kvod_storage_state"), show: (state) => ["writable", "full", "failing", "lost"][state] ?? String(state) },
];

/** One reading of /metrics: each metric's value summed over its labels. */
class MetricsSample {
  constructor(text, at) {
    this.at = at;
    this.values = new Map();
    for (const line of text.split("\n")) {
      if (line === "" || line.startsWith("#")) continue;
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
      if (!match) continue;
      const value = Number(match[3]);
      if (Number.isFinite(value)) this.values.set(match[1], (this.values.get(match[1]) ?? 0) + value);
    }
  }
  sum(name) { return this.values.get(name) ?? null; }
}

function rate(now, before, dt, name) {
  if (before === null || now.sum(name) === null || before.sum(name) === null || dt <= 0) return null;
  return Math.max(now.sum(name) - before.sum(name), 0) / dt;
}

function meanDuration(now, before, name) {
  if (before === null) return null;
  const count = (now.sum(`${name}_count`) ?? 0) - (before.sum(`${name}_count`) ?? 0);
  const total = (now.sum(`${name}_sum`) ?? 0) - (before.sum(`${name}_sum`) ?? 0);
  return count > 0 ? total / count : null;
}

function perSecond(value) { return value < 10 ? value.toFixed(1) : String(Math.round(value)); }
function duration(seconds) { return seconds < 0.001 ? `${(seconds * 1e6).toFixed(0)} µs` : `${(seconds * 1000).toFixed(2)} ms`; }
function bytes(count) {
  const units = ["B", "KiB", "MiB", "GiB"];
  let value = count;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return `${value < 10 && unit > 0 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

const dashboard = { previous: null, series: new Map(), timer: null, hidden: false };

function startDashboard() {
  const tiles = TILES.map((tile) => {
    const element = document.createElement("div");
    element.className = "tile";
    element.dataset.tile = tile.id;
    const title = document.createElement("span");
    title.className = "tile-title";
    title.textContent = tile.title;
    const figure = document.createElement("span");
    figure.className = "tile-value";
    figure.textContent = "–";
    const chart = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    chart.setAttribute("viewBox", `0 0 ${METRICS_KEPT - 1} 30`);
    chart.setAttribute("preserveAspectRatio", "none");
    chart.setAttribute("class", "spark");
    chart.setAttribute("aria-hidden", "true");
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    chart.append(line);
    element.append(title, figure, chart);
    dashboard.series.set(tile.id, []);
    return element;
  });
  $("tiles").replaceChildren(...tiles);
  readMetrics();
}

/** Reads /metrics, updates each tile's figure and its line of the last METRICS_KEPT figures, and reads again. */
async function readMetrics() {
  clearTimeout(dashboard.timer);
  dashboard.timer = setTimeout(readMetrics, METRICS_INTERVAL);
  if (dashboard.hidden) return;
  let sample;
  try {
    // The `metrics` operation serves what GET /metrics does, to the logged-in user if a server admin: no
    // token to ask for, and no refused HTTP request for the browser to log.
    const { text } = await state.client.request("metrics");
    sample = new MetricsSample(text, performance.now() / 1000);
  } catch (error) {
    if (error.code === "forbidden") {
      $("dashboard-note").textContent = "the server's figures are for server admins (admin on *)";
      clearTimeout(dashboard.timer);
      return;
    }
    $("dashboard-note").textContent = `metrics unavailable: ${describe(error)}`;
    return;
  }
  const revision = sample.sum("kvod_revision");
  if (revision !== null) noteRevision(revision);
  $("dashboard-note").textContent = `every ${METRICS_INTERVAL / 1000} s`;
  const previous = dashboard.previous;
  const dt = previous === null ? 0 : sample.at - previous.at;
  for (const tile of TILES) {
    const value = tile.read(sample, previous, dt);
    const element = $("tiles").querySelector(`[data-tile="${tile.id}"]`);
    if (element === null) continue;
    element.querySelector(".tile-value").textContent = value === null ? "–" : tile.show(value);
    if (value === null) continue;
    const series = dashboard.series.get(tile.id);
    series.push(value);
    if (series.length > METRICS_KEPT) series.shift();
    drawLine(element.querySelector("polyline"), series);
  }
  dashboard.previous = sample;
}

/** The series as a line scaled to the chart's height, newest at the right. */
function drawLine(line, series) {
  const top = Math.max(...series);
  const bottom = Math.min(...series, 0);
  const span = top - bottom || 1;
  const start = METRICS_KEPT - series.length;
  line.setAttribute("points", series.map((value, index) => `${start + index},${(29 - ((value - bottom) / span) * 28).toFixed(2)}`).join(" "));
}

$("toggle-dashboard").addEventListener("click", () => {
  dashboard.hidden = !dashboard.hidden;
  $("tiles").hidden = dashboard.hidden;
  $("toggle-dashboard").textContent = dashboard.hidden ? "Show" : "Hide";
  $("toggle-dashboard").setAttribute("aria-expanded", String(!dashboard.hidden));
  if (!dashboard.hidden) readMetrics();
});

// ---- Classes and bindings -------------------------------------------------------------------------------------

async function loadSchema() {
  try {
    const [classes, bindings] = await Promise.all([state.client.classes(), state.client.bindings()]);
    renderDefinitions($("classes"), classes, (definition) => definition.name, "no classes defined");
    renderDefinitions($("bindings"), bindings, (binding) =>
      binding.kind === "combineLatest"
        ? `#${binding.binding} combineLatest → ${binding.to.object}.${binding.to.keyPath}`
        : `#${binding.binding} ${binding.from.object}.${binding.from.keyPath} → ${binding.to.object}.${binding.to.keyPath}`,
    "no bindings");
  } catch (error) {
    $("classes").replaceChildren(emptyItem(describe(error)));
  }
}

function renderDefinitions(list, definitions, title, emptyText) {
  if (definitions.length === 0) { list.replaceChildren(emptyItem(emptyText)); return; }
  list.replaceChildren(...definitions.map((definition) => {
    const item = document.createElement("li");
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = title(definition);
    const body = document.createElement("pre");
    body.textContent = JSON.stringify(definition, null, 2);
    details.append(summary, body);
    item.append(details);
    return item;
  }));
}

function emptyItem(text) {
  const item = document.createElement("li");
  item.className = "empty";
  item.textContent = text;
  return item;
}

$("refresh-schema").addEventListener("click", () => {
  loadSchema();
  if (state.serverAdmin) loadAdminViews();
});

/** An error as people read it: the code, the message, and the details kvod gave (property, rule, limit…). */
function describe(error) {
  if (!(error instanceof KVODError)) return String(error?.message ?? error);
  const details = Object.entries(error.details).map(([key, value]) => `${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`);
  return `${error.code}: ${error.message}${details.length ? ` (${details.join(", ")})` : ""}`;
}

start().catch((error) => { $("server").textContent = `inspector error: ${describe(error)}`; });
