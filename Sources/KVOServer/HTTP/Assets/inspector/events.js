// The inspector's observations made in the page (the Observe form) and their event log.

import { $, clearMessages, describe, noteRevision, state } from "./page.js";

const MAX_EVENTS = 500;         // event lines kept

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
