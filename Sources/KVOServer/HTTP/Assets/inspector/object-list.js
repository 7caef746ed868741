// The inspector's object list: a page of ids at a time, kept live, a search, and the New object form.

import { $, POLL_INTERVAL, clearMessages, compareIds, describe, emptyItem, noteRevision, state } from "./page.js";
import { select } from "./object.js";

const MAX_LISTED = 1000;        // object ids shown for a search
const PAGE_SIZE = 200;          // object ids per page of the list

// Ids are read a page at a time with `list` (`limit` and `after`: the server pages them, so a store of millions
// is browsable), and kept current by one object-set observation of every id without its initial list (no
// cost up front, whatever the store's size): a creation or deletion within the page shows at once. A search
// is a pattern observation of its own, answered by the server (`order-*`; text without `*` matches ids that
// contain it), with its initial list and live changes.

export async function startObjectList() {
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

export function noteDeleted(id) {
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
