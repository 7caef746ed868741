// The inspector's definitions panel: classes and bindings, and for a server admin the users, this node and the
// other cluster nodes; also whether the New object form is offered.

import { $, describe, emptyItem, emptyRow, rights, state } from "./page.js";

/** The New object form only for a user who may write some object; the users and the node's state only for a
 * server admin. */
export async function showCreateControls() {
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
  if (rows.length === 0) rows.push(emptyRow(5, "no checkpoint heard from another node yet"));
  $("peers").tBodies[0].replaceChildren(...rows);
}

// ---- Classes and bindings -------------------------------------------------------------------------------------

export async function loadSchema() {
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

$("refresh-schema").addEventListener("click", () => {
  loadSchema();
  if (state.serverAdmin) loadAdminViews();
});
