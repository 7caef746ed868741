// The inspector's shared parts: element look-up, the page's state, the revision shown, the user's rights, the
// order of ids and how errors read. Every other module of the page builds on these.

import { KVODError } from "/kvod.js";

export const $ = (id) => document.getElementById(id);
export const POLL_INTERVAL = 2000;     // list polling, when the server cannot observe object sets

export const state = {
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

export function noteRevision(rev) {
  if (typeof rev === "number" && (state.revision === null || rev > state.revision)) {
    state.revision = rev;
    $("revision").textContent = `rev ${rev}`;
  }
}

/** What the user may do on `objects` and anywhere, as the server says (`access`); everything for an older
 * server that does not know the operation (the server still refuses what the user may not do). */
export async function rights(objects = []) {
  try {
    return await state.client.request("access", { objects });
  } catch (error) {
    if (error.code !== "unknown_op") throw error;
    return { anywhere: ["read", "write", "admin"], rights: Object.fromEntries(objects.map((id) => [id, ["read", "write", "admin"]])) };
  }
}

/** The protocol's order for ids (Swift String order, close to code point order). */
export function compareIds(a, b) { return a < b ? -1 : a > b ? 1 : 0; }

/** Clears every error and result line: a message belongs to the action that produced it, not to the next one. */
export function clearMessages() {
  for (const element of document.querySelectorAll("#app .error, #app .result")) element.textContent = "";
}

export function emptyItem(text) {
  const item = document.createElement("li");
  item.className = "empty";
  item.textContent = text;
  return item;
}

/** A table row of one cell spanning `columns`, saying `text`: what a table shows when it has no rows. */
export function emptyRow(columns, text) {
  const row = document.createElement("tr");
  const cell = document.createElement("td");
  cell.colSpan = columns;
  cell.textContent = text;
  row.append(cell);
  return row;
}

/** An error as people read it: the code, the message, and the details kvod gave (property, rule, limit…). */
export function describe(error) {
  if (!(error instanceof KVODError)) return String(error?.message ?? error);
  const details = Object.entries(error.details).map(([key, value]) => `${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`);
  return `${error.code}: ${error.message}${details.length ? ` (${details.join(", ")})` : ""}`;
}
