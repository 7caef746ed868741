// kvod inspector: the page kvod serves at GET /. Built on the JavaScript client (/kvod.js), nothing else.
// Everything the server sends is shown through textContent, never parsed as HTML.
//
// This module starts the page (connection, login, status); each module under /inspector/ draws one part of it
// and wires its own controls when it is loaded.

import { KVODClient, KVODError } from "/kvod.js";
import { $, describe, noteRevision, state } from "./inspector/page.js";
import { loadSchema, showCreateControls } from "./inspector/definitions.js";
import { startObjectList } from "./inspector/object-list.js";
import { startDashboard } from "./inspector/dashboard.js";
import "./inspector/events.js";  // the Observe form and the event log: it wires its controls when loaded

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

start().catch((error) => { $("server").textContent = `inspector error: ${describe(error)}`; });
