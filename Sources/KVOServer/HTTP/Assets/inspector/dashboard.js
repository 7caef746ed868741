// The inspector's dashboard: tiles of the server's figures, read from the `metrics` operation every few seconds.

import { $, describe, emptyRow, noteRevision, state } from "./page.js";

const METRICS_INTERVAL = 2000;  // dashboard: /metrics read this often
const METRICS_KEPT = 60;        // dashboard: samples drawn per tile (two minutes)

/** The tiles: a title, how to read a figure from two samples of /metrics (`now`, `before`, seconds between), and
 * how to show it. Counters become rates; histograms' sums and counts become mean durations. */
const TILES = [
  { id: "connections", title: "connections", read: (now) => now.sum("kvod_connections"), show: String },
  { id: "requests", title: "requests/s", read: (now, before, dt) => rate(now, before, dt, "kvod_requests_total"), show: perSecond },
  { id: "events", title: "events/s", read: (now, before, dt) => rate(now, before, dt, "kvod_events_sent_total"), show: perSecond },
  { id: "loop", title: "loop iteration", read: (now, before) => meanDuration(now, before, "kvod_loop_iteration_seconds"), show: duration },
  { id: "commit", title: "group commit", read: (now, before) => meanDuration(now, before, "kvod_group_commit_seconds"), show: duration },
  // Since the start; `kvoclient slow` (the `slow` operation) lists the last of each.
  { id: "slow", title: "slow requests", read: (now) => now.sum("kvod_slow_requests_total") ?? 0, show: String },
  { id: "stalls", title: "loop stalls", read: (now) => now.sum("kvod_loop_stalls_total") ?? 0, show: String },
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

const dashboard = { previous: null, series: new Map(), timer: null, hidden: false, forbidden: false };

export function startDashboard() {
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
      dashboard.forbidden = true;
      $("slow-view").hidden = true;
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
  await readSlowLog();
}

const SLOW_REQUESTS_SHOWN = 10;  // dashboard: the newest slow requests listed
const STALLS_SHOWN = 5;          // dashboard: then the newest loop stalls

/** Lists the newest entries of the `slow` operation's two logs (newest first in each): SLOW_REQUESTS_SHOWN requests,
 * then STALLS_SHOWN loop stalls (apart: at a low --slow-request the housekeeping tick's stalls, ten a second, would
 * push every request out). What `kvoclient slow` prints, never a value. */
async function readSlowLog() {
  let reply;
  try {
    reply = await state.client.request("slow");
  } catch (error) {
    $("slow-note").textContent = `unavailable: ${describe(error)}`;
    return;
  }
  $("slow-note").textContent = `over ${(reply.thresholdMicros / 1000).toFixed(reply.thresholdMicros % 1000 === 0 ? 0 : 3)} ms (--slow-request)`;
  const entries = [
    ...reply.requests.slice(0, SLOW_REQUESTS_SHOWN)
      .map((entry) => ({ ...entry, what: [entry.op, entry.object, entry.keyPath].filter((part) => part !== undefined).join(" ") })),
    ...reply.stalls.slice(0, STALLS_SHOWN).map((entry) => ({ ...entry, what: stallText(entry), connection: null, user: null })),
  ];
  const rows = entries.map((entry) => {
    const row = document.createElement("tr");
    row.dataset.kind = entry.op === undefined ? "stall" : "request";
    const cells = [new Date(entry.at).toISOString().slice(11, 23), (entry.micros / 1000).toFixed(3), entry.what,
      entry.connection === null ? "–" : String(entry.connection), entry.user ?? "–"];
    for (const text of cells) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.append(cell);
    }
    return row;
  });
  if (rows.length === 0) rows.push(emptyRow(5, "none since the start (or the last reset)"));
  $("slow-table").querySelector("tbody").replaceChildren(...rows);
}

/** A loop stall's line: what ran in it. */
function stallText(stall) {
  const parts = [`loop stall: ${stall.requests} requests, ${stall.events} events`];
  if (stall.commits > 0) parts.push(`${stall.commits} commits (${(stall.commitMicros / 1000).toFixed(3)} ms)`);
  if (stall.housekeeping) parts.push("housekeeping");
  if (stall.clusterEntries > 0) parts.push(`${stall.clusterEntries} cluster entries`);
  return parts.join(", ");
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
  $("slow-view").hidden = dashboard.hidden || dashboard.forbidden;
  $("toggle-dashboard").textContent = dashboard.hidden ? "Show" : "Hide";
  $("toggle-dashboard").setAttribute("aria-expanded", String(!dashboard.hidden));
  if (!dashboard.hidden) readMetrics();
});
