// Tests of the JavaScript client (GET /kvod.js) in node against a real kvod, with node's test runner.
// Run by Tests/Web/test_javascript_client.py, which starts kvod and passes KVOD_HTTP_PORT; the module under
// test is the one kvod serves (fetched and imported from a data: URL), so the bytes tested are the bytes served.
// Needs node 22+, or node 20 with --experimental-websocket (global WebSocket).
import { test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const HTTP_PORT = Number(process.env.KVOD_HTTP_PORT);
const BASE = `http://127.0.0.1:${HTTP_PORT}`;
// KVOD_JS=path tests a file instead (while editing the parts, before kvod is rebuilt with them: the module is
// `cat Sources/KVOServer/HTTP/Assets/kvod/*.js > path`).
const source = process.env.KVOD_JS ? await readFile(process.env.KVOD_JS, "utf8") : await (await fetch(`${BASE}/kvod.js`)).text();
const modulePath = join(tmpdir(), `kvod-served-${process.pid}.mjs`);
await writeFile(modulePath, source);
const { connect, KVODError, decodeChange } = await import(modulePath);
const WS = `ws://127.0.0.1:${HTTP_PORT}/ws`;

let unique = 0;
const objectId = (name) => `${name}-${process.pid}-${++unique}`;

/** The next `count` changes of an observation's async iterator, failing after `ms`. */
async function take(iterator, count, ms = 5000) {
  const changes = [];
  const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out with ${JSON.stringify(changes)}`)), ms).unref());
  while (changes.length < count) {
    const next = await Promise.race([iterator.next(), timeout]);
    if (next.done) break;
    changes.push(next.value);
  }
  return changes;
}

const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function eventually(condition, ms = 5000) {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await wait(20);
  }
}

test("requests resolve with replies and reject with KVODError carrying the code and details", async () => {
  const kvod = await connect(WS, { heartbeat: 0 });
  try {
    assert.equal(kvod.server.server, "kvod");
    const id = objectId("person");
    const created = await kvod.create(id, { name: "Ada", address: { city: "London" }, tags: ["a", "c"] });
    assert.equal(typeof created.rev, "number");
    assert.equal(await kvod.get(id, "address.city"), "London");
    const set = await kvod.set(id, "address.city", "Paris");
    assert.equal(set.rev, created.rev + 1);
    await kvod.insert(id, "tags", ["b"], 1);
    await kvod.replace(id, "tags", 0, "A");
    await kvod.remove(id, "tags", [2]);
    assert.deepEqual(await kvod.get(id), { name: "Ada", address: { city: "Paris" }, tags: ["A", "b"] });
    assert.ok((await kvod.list()).includes(id));
    await assert.rejects(kvod.create(id), (error) => error instanceof KVODError && error.code === "exists");
    await assert.rejects(kvod.set(id, "address.city.zip", 1), { code: "type_mismatch" });
    await assert.rejects(kvod.get(objectId("missing")), { code: "not_found" });
    await assert.rejects(kvod.request("frobnicate"), { code: "unknown_op" });
    // A refused value reports the class's details (property, rule).
    await kvod.defineClass({ name: `Temp${process.pid}`, properties: { celsius: { type: "number", max: 100 } } });
    const sensor = objectId("sensor");
    await kvod.create(sensor, { celsius: 20 }, `Temp${process.pid}`);
    await assert.rejects(kvod.set(sensor, "celsius", 500), (error) =>
      error.code === "invalid_value" && error.details.property === "celsius" && error.details.rule === "max");
    assert.ok((await kvod.classes()).some((definition) => definition.name === `Temp${process.pid}`));
  } finally {
    kvod.close();
  }
});

test("increment adds atomically, by 1 by default, and refuses what is not a number", async () => {
  const kvod = await connect(WS, { heartbeat: 0 });
  try {
    const id = objectId("counter");
    const created = await kvod.create(id, { visits: 40, name: "x" });
    const first = await kvod.increment(id, "visits");
    assert.deepEqual(first, { rev: created.rev + 1, value: 41 });
    assert.equal((await kvod.increment(id, "visits", -51)).value, -10);
    assert.equal((await kvod.increment(id, "ratio", 0.5)).value, 0.5);
    await assert.rejects(kvod.increment(id, "name"), { code: "type_mismatch" });
    assert.deepEqual(await kvod.get(id), { visits: -10, name: "x", ratio: 0.5 });
  } finally {
    kvod.close();
  }
});

test("numbers from 2^63 to 1e21 (integer literals in JSON.stringify) go as the doubles they are, never refused or rounded", async () => {
  const kvod = await connect(WS, { heartbeat: 0 });
  try {
    const id = objectId("big");
    // kvod refuses an integer literal past 64 bits; kvod.js writes these doubles with an exponent instead.
    const values = { two64: 2 ** 64, e20: 1e20, minus: -(2 ** 63), e25: 1e25, small: 9007199254740991, text: "18446744073709552000" };
    await kvod.create(id, values);
    assert.deepEqual(await kvod.get(id), values);
    assert.equal((await kvod.increment(id, "small", 2 ** 64)).value, 9007199254740991 + 2 ** 64);
  } finally {
    kvod.close();
  }
});

test("conditional writes reject with conflict and its details; two clients racing update lose no update", async () => {
  const first = await connect(WS, { heartbeat: 0 });
  const second = await connect(WS, { heartbeat: 0 });
  try {
    const id = objectId("account");
    await first.create(id, { balance: 0 }, undefined, { ifAbsent: true });
    await assert.rejects(first.create(id, {}, undefined, { ifAbsent: true }), { code: "conflict" });
    await assert.rejects(first.set(id, "balance", 5, { ifEquals: { keyPath: "balance", value: 1 } }),
                         (error) => error.code === "conflict" && error.details.condition === "ifEquals" && error.details.value === 0);
    const rounds = 300;
    const race = (kvod) => (async () => { for (let i = 0; i < rounds; i++) await kvod.update(id, "balance", (n) => (n ?? 0) + 1); })();
    await Promise.all([race(first), race(second)]);
    assert.equal(await first.get(id, "balance"), 2 * rounds);
    assert.deepEqual((await second.update(id, "visits", (n) => (n ?? 0) + 1)).value, 1);
    const { rev } = await first.set(id, "note", "read at this rev");
    await assert.rejects(first.set(id, "note", "stale", { ifRev: rev - 1 }),
                         (error) => error.code === "conflict" && error.details.changedRev === rev);
    await first.set(id, "note", "fresh", { ifRev: rev });
    await first.delete(id, { ifExists: true });
    await assert.rejects(first.update(id, "balance", (n) => n + 1), { code: "not_found" });
  } finally {
    first.close();
    second.close();
  }
});

test("batch applies every part with one revision or none, and a refused part names its index", async () => {
  const kvod = await connect(WS, { heartbeat: 0 });
  const observer = await connect(WS, { heartbeat: 0 });
  try {
    const alice = objectId("alice");
    const bob = objectId("bob");
    await kvod.create(alice, { balance: 100 });
    await kvod.create(bob, { balance: 0 });
    const seen = observer.observe(bob, "balance");
    await seen.ready;
    const { rev, results } = await kvod.batch([
      { op: "increment", object: alice, keyPath: "balance", by: -30, ifEquals: { keyPath: "balance", value: 100 } },
      { op: "set", object: bob, keyPath: "balance", value: 30 },
    ]);
    assert.deepEqual(results, [{ value: 70 }, {}]);
    const change = (await seen[Symbol.asyncIterator]().next()).value;
    assert.equal(change.rev, rev);
    assert.equal(change.new, 30);
    await assert.rejects(kvod.batch([
      { op: "set", object: alice, keyPath: "balance", value: 0 },
      { op: "delete", object: bob, ifAbsent: true },
    ]), (error) => error.code === "conflict" && error.details.part === 1);
    assert.equal(await kvod.get(alice, "balance"), 70);
    await assert.rejects(kvod.batch([{ op: "get", object: alice }]), { code: "bad_request" });
  } finally {
    kvod.close();
    observer.close();
  }
});

for (const events of ["compact", "full"]) {
  test(`observations as async iterators decode every reason and kind (${events} events)`, async () => {
    const kvod = await connect(WS, { events, heartbeat: 0 });
    try {
      assert.equal(kvod.events, events);
      const id = objectId("list");
      await kvod.create(id, { items: [1, 2], name: "x" });
      const items = kvod.observe(id, "items", { options: ["new", "old", "initial", "prior"] });
      const name = kvod.observe(id, "name", { options: ["old"] });
      await Promise.all([items.ready, name.ready]);
      const iterator = items[Symbol.asyncIterator]();
      await kvod.insert(id, "items", [9], 0);
      await kvod.replace(id, "items", 1, 10);
      await kvod.remove(id, "items", [2]);
      await kvod.set(id, "items", []);
      await kvod.set(id, "name", "y");
      await kvod.delete(id);
      const changes = await take(iterator, 20);
      const shape = changes.map(({ reason, kind, isPrior, indexes, new: value, old }) => ({ reason, kind, isPrior, indexes, new: value, old }));
      assert.deepEqual(shape, [
        { reason: "initial", kind: 1, isPrior: false, indexes: undefined, new: [1, 2], old: undefined },
        { reason: "valueChanged", kind: 2, isPrior: true, indexes: [0], new: undefined, old: undefined },
        { reason: "valueChanged", kind: 2, isPrior: false, indexes: [0], new: [9], old: undefined },
        { reason: "valueChanged", kind: 4, isPrior: true, indexes: [1], new: undefined, old: [1] },
        { reason: "valueChanged", kind: 4, isPrior: false, indexes: [1], new: [10], old: [1] },
        { reason: "valueChanged", kind: 3, isPrior: true, indexes: [2], new: undefined, old: [2] },
        { reason: "valueChanged", kind: 3, isPrior: false, indexes: [2], new: undefined, old: [2] },
        { reason: "valueChanged", kind: 1, isPrior: true, indexes: undefined, new: undefined, old: [9, 10] },
        { reason: "valueChanged", kind: 1, isPrior: false, indexes: undefined, new: [], old: [9, 10] },
        { reason: "sourceDeleted", kind: 1, isPrior: true, indexes: undefined, new: undefined, old: [] },
        { reason: "sourceDeleted", kind: 1, isPrior: false, indexes: undefined, new: null, old: [] },
      ], "the iteration ends after sourceDeleted");
      assert.ok(changes.every((change) => change.object === id && change.keyPath === "items" && change.sub === items.sub));
      assert.ok(changes.slice(1).every((change, index) => index === 0 || change.rev >= changes[index].rev), "revisions ascend");
      const nameChanges = await take(name[Symbol.asyncIterator](), 5);
      assert.deepEqual(nameChanges.map((change) => [change.reason, change.old, "new" in change]),
        [["valueChanged", "x", false], ["sourceDeleted", "y", false]]);
    } finally {
      kvod.close();
    }
  });
}

test("decodeChange reads every compact reason code, kind and prior as its full twin; an unknown code passes through", () => {
  const observation = { object: "o", keyPath: "v", pattern: null };
  const full = (reason, change, extra = {}) =>
    decodeChange({ event: "change", sub: 7, object: "o", keyPath: "v", reason, rev: 5, change, ...extra }, observation);
  const compact = (message) => decodeChange({ s: 7, r: 5, ...message }, observation);
  const pairs = [
    [{ n: 1 }, full("valueChanged", { kind: 1, new: 1 })],
    [{ w: "i", n: 1 }, full("initial", { kind: 1, new: 1 })],
    [{ w: "p", n: 1, o: 0 }, full("pathChanged", { kind: 1, new: 1, old: 0 })],
    [{ w: "s", n: null, o: 0 }, full("sourceDeleted", { kind: 1, new: null, old: 0 })],
    [{ w: "f", n: null, o: null }, full("forbidden", { kind: 1, new: null, old: null })],
    [{ w: "r", n: 1 }, full("resync", { kind: 1, new: 1 })],
    [{ w: "c", t: "o", n: 1, o: null }, full("created", { kind: 1, new: 1, old: null })],
    [{ p: 1, o: 0 }, full("valueChanged", { kind: 1, notificationIsPrior: true, old: 0 })],
    [{ p: "s", o: 0 }, full("sourceDeleted", { kind: 1, notificationIsPrior: true, old: 0 })],
    [{ p: "p", o: 0 }, full("pathChanged", { kind: 1, notificationIsPrior: true, old: 0 })],
    [{ 2: [0, 3], n: [1, 2] }, full("valueChanged", { kind: 2, indexes: [0, 3], new: [1, 2] })],
    [{ 3: [4], o: [1] }, full("valueChanged", { kind: 3, indexes: [4], old: [1] })],
    [{ 4: [4], n: [2], o: [1] }, full("valueChanged", { kind: 4, indexes: [4], new: [2], old: [1] })],
    [{ p: 1, 4: [4], o: [1] }, full("valueChanged", { kind: 4, indexes: [4], notificationIsPrior: true, old: [1] })],
  ];
  for (const [message, expected] of pairs) assert.deepEqual(compact(message), expected, JSON.stringify(message));
  // A code this client does not know (from a newer server) is the reason as sent, like an unknown full name.
  assert.equal(compact({ w: "z", n: 1 }).reason, "z");
  assert.equal(compact({ p: "z", o: 1 }).reason, "z");
  assert.equal(compact({ p: "z", o: 1 }).isPrior, true);
  assert.equal(full("somethingNew", { kind: 1 }).reason, "somethingNew");
});

test("subscribe calls back in order; its unsubscribe function ends the observation on the server, twice is harmless", async () => {
  const kvod = await connect(WS, { heartbeat: 0 });
  try {
    const id = objectId("counter");
    await kvod.create(id, { n: 0 });
    const seen = [];
    const unsubscribe = kvod.subscribe(id, "n", (change) => seen.push(change.new));
    await eventually(async () => (await kvod.info(id)).observers.length === 1);
    for (let n = 1; n <= 50; n++) kvod.set(id, "n", n);
    await kvod.ping();
    assert.deepEqual(seen, Array.from({ length: 50 }, (_, index) => index + 1));
    unsubscribe();
    unsubscribe();
    await eventually(async () => (await kvod.info(id)).observers.length === 0);
    await kvod.set(id, "n", 99);
    await kvod.ping();
    assert.equal(seen.length, 50, "no change after unsubscribe");
    // A refused observe reaches onError, not the callback.
    const refusal = await new Promise((resolve) => kvod.subscribe(objectId("missing"), "n", () => resolve("called"), {}, resolve));
    assert.equal(refusal.code, "not_found");
  } finally {
    kvod.close();
  }
});

test("breaking out of for await unobserves", async () => {
  const kvod = await connect(WS, { heartbeat: 0 });
  try {
    const id = objectId("loop");
    await kvod.create(id, { v: 0 });
    const observation = kvod.observe(id, "v", { options: ["new", "initial"] });
    for await (const change of observation) {
      assert.equal(change.reason, "initial");
      break;
    }
    await eventually(async () => (await kvod.info(id)).observers.length === 0);
    assert.equal(observation.ended, true);
  } finally {
    kvod.close();
  }
});

for (const events of ["compact", "full"]) {
  test(`object-set observations: ids, creations and deletions, and a key path on every matching object (${events} events)`, async () => {
    const kvod = await connect(WS, { events, heartbeat: 0 });
    try {
      const prefix = `set${process.pid}-${events}:`;
      await kvod.create(`${prefix}b`, { city: "Oslo" });
      await kvod.create(`${prefix}a`, { city: "Rome" });
      await kvod.create(`other-${prefix}`, { city: "Lima" });
      const ids = kvod.observe({ pattern: `${prefix}*` }, undefined, { options: ["initial"] });
      const cities = kvod.observe({ pattern: `${prefix}*` }, "city", { options: ["new", "old"] });
      await Promise.all([ids.ready, cities.ready]);
      await kvod.create(`${prefix}c`, { city: "Bern" });
      await kvod.set(`${prefix}a`, "city", "Paris");
      await kvod.set(`other-${prefix}`, "city", "Quito");
      await kvod.delete(`${prefix}b`);
      const idChanges = await take(ids[Symbol.asyncIterator](), 3);
      assert.deepEqual(idChanges[0].ids, [`${prefix}a`, `${prefix}b`], "initial lists the matching ids, sorted");
      assert.deepEqual(idChanges.slice(1).map((change) => [change.reason, change.object]),
        [["created", `${prefix}c`], ["sourceDeleted", `${prefix}b`]]);
      assert.equal(ids.ended, false, "a deletion does not end an object-set observation");
      const cityChanges = await take(cities[Symbol.asyncIterator](), 3);
      assert.deepEqual(cityChanges.map((change) => [change.object, change.reason, change.old, change.new]), [
        [`${prefix}c`, "created", null, "Bern"],
        [`${prefix}a`, "valueChanged", "Rome", "Paris"],
        [`${prefix}b`, "sourceDeleted", "Oslo", null],
      ]);
    } finally {
      kvod.close();
    }
  });
}

for (const events of ["compact", "full"]) {
  test(`live queries: {pattern, where} gives entered, changes inside and left (${events} events)`, async () => {
    const kvod = await connect(WS, { events, heartbeat: 0 });
    try {
      const prefix = `lq${process.pid}-${events}:`;
      await kvod.create(`${prefix}1`, { status: "open", total: 150 });
      await kvod.create(`${prefix}2`, { status: "open", total: 50 });
      const query = { pattern: `${prefix}*`, where: "status == 'open' && total > 100" };
      const ids = kvod.observe(query, undefined, { options: ["initial"] });
      const totals = kvod.observe(query, "total", { options: ["new", "old"] });
      await Promise.all([ids.ready, totals.ready]);
      await kvod.set(`${prefix}2`, "total", 120);
      await kvod.set(`${prefix}1`, "total", 160);
      await kvod.set(`${prefix}1`, "status", "closed");
      await kvod.delete(`${prefix}2`);
      const idChanges = await take(ids[Symbol.asyncIterator](), 4);
      assert.deepEqual(idChanges[0].ids, [`${prefix}1`]);
      assert.deepEqual(idChanges.slice(1).map((change) => [change.reason, change.object]),
        [["entered", `${prefix}2`], ["left", `${prefix}1`], ["left", `${prefix}2`]]);
      const totalChanges = await take(totals[Symbol.asyncIterator](), 4);
      assert.deepEqual(totalChanges.map((change) => [change.object, change.reason, change.old, change.new]), [
        [`${prefix}2`, "entered", null, 120],
        [`${prefix}1`, "valueChanged", 150, 160],
        [`${prefix}1`, "left", 160, null],
        [`${prefix}2`, "left", 120, null],
      ]);
      await assert.rejects(kvod.observe({ pattern: `${prefix}*`, where: "total >" }).ready, { code: "invalid_expression" });
    } finally {
      kvod.close();
    }
  });
}

test("a live query resumes after a dropped connection with what it missed, replayed in order", async () => {
  const proxy = await startProxy();
  const writer = await connect(WS, { heartbeat: 0 });
  const kvod = await connect(proxy.url, { heartbeat: 0, minimumDelay: 50, maximumDelay: 200 });
  try {
    const prefix = `${objectId("lqresume")}:`;
    await writer.create(`${prefix}1`, { open: true });
    const ids = kvod.observe({ pattern: `${prefix}*`, where: "open" });
    await ids.ready;
    const iterator = ids[Symbol.asyncIterator]();
    proxy.cut();
    await writer.create(`${prefix}2`, { open: true });
    await writer.set(`${prefix}1`, "open", false);
    await eventually(() => kvod.state === "open");
    await writer.create(`${prefix}3`, { open: true });
    const changes = await take(iterator, 3);
    assert.deepEqual(changes.map((change) => [change.reason, change.object]), [
      ["entered", `${prefix}2`], ["left", `${prefix}1`], ["entered", `${prefix}3`],
    ]);
  } finally {
    kvod.close();
    writer.close();
    proxy.close();
  }
});

for (const events of ["compact", "full"]) {
  test(`a ttl ends an object: touch keeps it, then sourceDeleted says cause expired (${events} events)`, async () => {
    const kvod = await connect(WS, { events, heartbeat: 0 });
    try {
      const id = objectId(`ttl-${events}`);
      await kvod.create(id, { user: "ada" }, undefined, { ttl: 2 });
      const touched = await kvod.touch(id);
      assert.equal(typeof touched.expiresAt, "number");
      assert.equal((await kvod.touch(objectId("none")).catch((error) => error)).code, "not_found");
      const observation = kvod.observe(id, "user", { options: ["new", "old"] });
      await observation.ready;
      const [ending] = await take(observation[Symbol.asyncIterator](), 1, 15000);
      assert.deepEqual([ending.reason, ending.cause, ending.old], ["sourceDeleted", "expired", "ada"]);
      await assert.rejects(kvod.set(id, "user", "x", { ttl: 5 }), { code: "not_found" });
      await assert.rejects(kvod.create(id, {}, undefined, { ttl: -1 }), { code: "bad_request" });
    } finally {
      kvod.close();
    }
  });
}

/**
 * A TCP proxy in front of kvod's HTTP port whose connections the test can cut (closed at once: the client sees the
 * end) or blackhole (kept open, every byte from then on dropped both ways: a network gone without a FIN or RST).
 */
async function startProxy() {
  const sockets = new Set();
  const blackholed = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(HTTP_PORT, "127.0.0.1");
    sockets.add(client); sockets.add(upstream);
    const relay = (from, to) => from.on("data", (bytes) => { if (!blackholed.has(from)) to.write(bytes); });
    relay(client, upstream); relay(upstream, client);
    const end = () => {
      client.destroy(); upstream.destroy();
      for (const socket of [client, upstream]) { sockets.delete(socket); blackholed.delete(socket); }
    };
    client.on("error", end); upstream.on("error", end); client.on("close", end); upstream.on("close", end);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `ws://127.0.0.1:${server.address().port}/ws`,
    cut() { for (const socket of sockets) socket.destroy(); sockets.clear(); },
    blackhole() { for (const socket of sockets) blackholed.add(socket); },
    close() { this.cut(); server.close(); },
    get connections() { return sockets.size / 2; },
  };
}

test("after a dropped connection the client reconnects and resumes with sinceRev: every change once, in order", async () => {
  const proxy = await startProxy();
  const writer = await connect(WS, { heartbeat: 0 });
  const kvod = await connect(proxy.url, { heartbeat: 0, minimumDelay: 50, maximumDelay: 200 });
  const states = [];
  kvod.on("state", (state) => states.push(state));
  try {
    const id = objectId("resume");
    await writer.create(id, { n: 0 });
    const observation = kvod.observe(id, "n", { options: ["new", "old"] });
    await observation.ready;
    const iterator = observation[Symbol.asyncIterator]();
    await writer.set(id, "n", 1);
    assert.deepEqual((await take(iterator, 1)).map((change) => change.new), [1]);

    const inFlight = kvod.get(id, "n");
    proxy.cut();
    await assert.rejects(inFlight, { code: "connection_lost" });
    // Written while the client is away: it must receive all of them after it is back, then live ones.
    for (let n = 2; n <= 6; n++) await writer.set(id, "n", n);
    await eventually(() => kvod.state === "open");
    await writer.set(id, "n", 7);
    const changes = await take(iterator, 6);
    assert.deepEqual(changes.map((change) => [change.old, change.new]), [[1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7]]);
    states.length = Math.min(states.length, 2);
    assert.deepEqual(states.slice(0, 2), ["reconnecting", "open"]);
    // An object-set observation resumes the same way.
    const prefix = `${id}-set:`;
    const ids = kvod.observe({ pattern: `${prefix}*` });
    await ids.ready;
    const idIterator = ids[Symbol.asyncIterator]();
    await writer.create(`${prefix}1`);
    assert.equal((await take(idIterator, 1))[0].object, `${prefix}1`);
    proxy.cut();
    await writer.create(`${prefix}2`);
    await writer.delete(`${prefix}1`);
    await eventually(() => kvod.state === "open");
    await writer.create(`${prefix}3`);
    assert.deepEqual((await take(idIterator, 3)).map((change) => [change.reason, change.object]),
      [["created", `${prefix}2`], ["sourceDeleted", `${prefix}1`], ["created", `${prefix}3`]]);
    // Requests made while reconnecting are sent once the connection is back.
    proxy.cut();
    await eventually(() => kvod.state === "reconnecting");
    const queued = kvod.get(id, "n");
    assert.equal(await queued, 7);
  } finally {
    kvod.close();
    writer.close();
    proxy.close();
  }
});

test("the heartbeat notices a server gone silent (no FIN, no RST), reconnects and resumes; a busy connection is not taken for dead", async () => {
  const proxy = await startProxy();
  const writer = await connect(WS, { heartbeat: 0 });
  const kvod = await connect(proxy.url, { heartbeat: 200, heartbeatTimeout: 400, minimumDelay: 50, maximumDelay: 200 });
  const states = [];
  kvod.on("state", (state) => states.push(state));
  try {
    const id = objectId("silent");
    await writer.create(id, { n: 0 });
    const observation = kvod.observe(id, "n", { options: ["new"] });
    await observation.ready;
    const iterator = observation[Symbol.asyncIterator]();
    // A second of pings answered: the connection stays.
    await wait(1000);
    assert.deepEqual(states, []);
    // The network goes silent: nothing is closed, nothing arrives. The unanswered ping ends the connection within
    // heartbeat + heartbeatTimeout; the client reconnects (new connections pass) and resumes from its last revision.
    const cutAt = Date.now();
    proxy.blackhole();
    await writer.set(id, "n", 1);
    await eventually(() => states.includes("reconnecting"), 3000);
    const noticedAfter = Date.now() - cutAt;
    assert.ok(noticedAfter <= 1500, `noticed after ${noticedAfter} ms`);
    await eventually(() => kvod.state === "open");
    await writer.set(id, "n", 2);
    assert.deepEqual((await take(iterator, 2)).map((change) => change.new), [1, 2]);
    // A stream of changes keeps a connection alive even while a ping's answer queues behind them.
    const reconnections = states.filter((state) => state === "reconnecting").length;
    for (let n = 3; n <= 40; n++) await writer.set(id, "n", n);
    assert.deepEqual((await take(iterator, 38)).map((change) => change.new).at(-1), 40);
    assert.equal(states.filter((state) => state === "reconnecting").length, reconnections);
  } finally {
    kvod.close();
    writer.close();
    proxy.close();
  }
});

test("connect fails with the server's refusal for wrong credentials and cannot reach a closed port", async () => {
  // This kvod has no users: auth with a token fails as unauthenticated.
  await assert.rejects(connect(WS, { token: "kvod_not_a_token", heartbeat: 0 }), { code: "unauthenticated" });
  const closed = net.createServer();
  await new Promise((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const port = closed.address().port;
  closed.close();
  await assert.rejects(connect(`ws://127.0.0.1:${port}/ws`, { heartbeat: 0 }), { code: "closed" });
});

test("presence: a blip within the grace resumes the session (nothing runs); a client gone longer runs onDisconnect and loses its ephemeral objects", async () => {
  const proxy = await startProxy();
  const observer = await connect(WS, { heartbeat: 0 });
  const kvod = await connect(proxy.url, { heartbeat: 0, minimumDelay: 50, maximumDelay: 200 });
  try {
    const user = objectId("presence-user");
    const cursor = objectId("presence-cursor");
    await observer.create(user, { online: true });
    await assert.rejects(kvod.create(cursor, {}, undefined, { ephemeral: true }), { code: "bad_request" });
    const session = await kvod.startSession({ grace: 1.5 });
    assert.match(session.id, /^[0-9a-f]{32}$/);
    assert.equal(session.grace, 1.5);
    assert.equal(await kvod.onDisconnect({ op: "set", object: user, keyPath: "online", value: false }), 1);
    await kvod.create(cursor, { x: 1 }, undefined, { ephemeral: true });
    await assert.rejects(kvod.onDisconnect({ op: "get", object: user }), { code: "bad_request" });
    const online = observer.observe(user, "online", { options: ["new"] });
    await online.ready;
    const changes = online[Symbol.asyncIterator]();

    // A cut shorter than the grace: the client resumes its session, and nothing runs.
    proxy.cut();
    await eventually(() => kvod.state === "open");
    await wait(2000);
    assert.equal(await observer.get(user, "online"), true);
    assert.deepEqual(await observer.get(cursor), { x: 1 });
    assert.equal(kvod.session.id, session.id);

    // Gone for good: after the grace the action runs once and the ephemeral object is deleted.
    kvod.close();
    const [offline] = await take(changes, 1, 10000);
    assert.deepEqual([offline.reason, offline.new], ["valueChanged", false]);
    await eventually(async () => (await observer.get(cursor).catch((error) => error.code)) === "not_found");
    await wait(500);
    assert.equal(await observer.get(user, "online"), false);
  } finally {
    kvod.close();
    observer.close();
    proxy.close();
  }
});

test("presence: endSession runs the actions at once; cancelOnDisconnect drops one; a lost session is reported", async () => {
  const proxy = await startProxy();
  const kvod = await connect(proxy.url, { heartbeat: 0, minimumDelay: 600, maximumDelay: 700 });
  try {
    const id = objectId("presence-end");
    await kvod.create(id, { a: 0, b: 0 });
    await kvod.startSession({ grace: 0 });
    const first = await kvod.onDisconnect({ op: "set", object: id, keyPath: "a", value: 1 });
    await kvod.onDisconnect({ op: "batch", ops: [{ op: "set", object: id, keyPath: "b", value: 2 }] });
    assert.equal(await kvod.cancelOnDisconnect(first), 1);
    assert.equal(await kvod.endSession(), 1);
    assert.deepEqual(await kvod.get(id), { a: 0, b: 2 });
    assert.equal(kvod.session, null);

    // grace 0: a reconnection after the cut finds the session ended.
    await kvod.startSession({ grace: 0 });
    await kvod.onDisconnect({ op: "increment", object: id, keyPath: "a" });
    const lost = new Promise((resolve) => { kvod.onsessionlost = resolve; });
    proxy.cut();
    const session = await lost;
    assert.match(session.id, /^[0-9a-f]{32}$/);
    assert.equal(kvod.session, null);
    assert.equal(await kvod.get(id, "a"), 1);
  } finally {
    kvod.close();
    proxy.close();
  }
});

test("strict requests over WebSocket: an unknown field is refused naming it; the client sends no unannounced field", async () => {
  const kvod = await connect(WS, { heartbeat: 0 });
  try {
    assert.deepEqual(kvod.features, ["atLeastRev", "compactEvents", "conditions", "ephemeral", "liveQueries", "sessions", "signals", "sinceRev", "ttl"]);
    const id = objectId("strict");
    await kvod.create(id, { n: 1 });
    await assert.rejects(kvod.request("set", { object: id, keyPath: "n", value: 2, ifequals: { keyPath: "n", value: 99 } }),
      (error) => error.code === "bad_request" && error.message === "unknown field 'ifequals' (did you mean 'ifEquals'?)");
    await assert.rejects(kvod.request("observe", { pattern: `${id}*`, where: null }), (error) => error.code === "bad_request");
    // A server that announced fewer features (an older one): the field is not sent, the call fails locally.
    kvod.features = kvod.features.filter((feature) => feature !== "ttl" && feature !== "sessions");
    await assert.rejects(kvod.set(id, "n", 3, { ttl: 5 }), (error) => error.code === "not_announced" && error.details.feature === "ttl");
    await assert.rejects(kvod.batch([{ op: "set", object: id, keyPath: "n", value: 4, ttl: 5 }]), (error) => error.code === "not_announced");
    await assert.rejects(kvod.startSession(), (error) => error.code === "not_announced" && error.details.feature === "sessions");
    assert.equal(await kvod.get(id, "n"), 1, "nothing was written");
    await kvod.set(id, "n", 5, { ifExists: true });
    assert.equal(await kvod.get(id, "n"), 5);
  } finally {
    kvod.close();
  }
});

test("signal: observers hear the payload as a change of reason signal (full and compact), with no revision; refusals reject", async () => {
  const sender = await connect(WS, { heartbeat: 0 });
  const listener = await connect(WS, { heartbeat: 0 });
  try {
    const id = objectId("room");
    const { rev } = await sender.create(id, { topic: "kvo" });
    const ofKey = listener.observe(id, "topic", { options: ["new", "old"] });
    const ofPattern = listener.observe({ pattern: `${id}*` });
    await ofKey.ready;
    await ofPattern.ready;
    await sender.signal(id, { x: 3, y: [4] });
    await sender.set(id, "topic", "swift");
    const [signal, change] = await take(ofKey[Symbol.asyncIterator](), 2);
    assert.deepEqual({ reason: signal.reason, new: signal.new, old: signal.old, keyPath: signal.keyPath, object: signal.object, rev: signal.rev },
                     { reason: "signal", new: { x: 3, y: [4] }, old: undefined, keyPath: null, object: id, rev });
    assert.equal(change.reason, "valueChanged");
    assert.equal(change.rev, rev + 1, "the signal took no revision");
    const [heard] = await take(ofPattern[Symbol.asyncIterator](), 1);
    assert.equal(heard.reason, "signal");
    assert.equal(heard.object, id);
    assert.deepEqual(decodeChange({ s: 3, r: 9, t: id, w: "g", n: 1 }, { object: null, keyPath: "k", pattern: null }),
                     { sub: 3, rev: 9, object: id, keyPath: null, reason: "signal", kind: 1, isPrior: false, new: 1 });
    await assert.rejects(sender.signal(objectId("missing"), 1), (error) => error instanceof KVODError && error.code === "not_found");
    await assert.rejects(sender.signal(id, "x".repeat(70000)), (error) => error.code === "too_large" && error.details.limit === 65536);
  } finally {
    sender.close();
    listener.close();
  }
});
