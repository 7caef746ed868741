// kvod.js: the JavaScript client of kvod, served by kvod itself at GET /kvod.js.
// A dependency-free ES module for browsers (and node 22+, or node 20 with --experimental-websocket).
// It speaks kvod's JSON-lines protocol over WebSocket, one message per frame (docs/protocol.md), and is
// documented in docs/javascript-client.md.
//
//   import { connect } from "/kvod.js";
//   const kvod = await connect();                       // ws(s)://<this page's host>/ws
//   await kvod.create("person", { name: "Ada" });
//   for await (const change of kvod.observe("person", "name", { options: ["new", "old"] })) { … }
//   const unsubscribe = kvod.subscribe("person", "name", change => …);
//
// Requests are promises (rejected with KVODError). Observations are async iterators or callbacks. When the
// connection drops, the client reconnects with a jittered backoff, logs in again, and resumes every live
// observation with `sinceRev`, so no change is lost or repeated; requests in flight when it dropped are
// rejected with code "connection_lost" (never retried: a write may or may not have happened).
//
// Served as one file, made at build time from the parts in Sources/KVOServer/HTTP/Assets/kvod/ in the order of
// their names (client.js, observation.js, protocol.js): one module, whatever loads it.

const DEFAULT_OPTIONS = {
  events: "compact",         // the event encoding asked for in hello: "compact" or "full"
  reconnect: true,           // reconnect and resume after a dropped connection
  minimumDelay: 250,         // backoff bounds, milliseconds
  maximumDelay: 10_000,
  heartbeat: 15_000,         // a ping every so many milliseconds (well within kvod's --idle-timeout, 60 s); 0 turns it off
  heartbeatTimeout: 10_000,  // nothing from the server within this of a ping: the connection is taken as dead
  client: "kvod.js",
};

/** The default endpoint: this page's host, `/ws`, wss on https pages. */
function defaultURL() {
  if (typeof location === "undefined") throw new KVODError("closed", "connect(url): no page location to default to");
  return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
}

/**
 * Connects to kvod and resolves once `hello` (and `auth`, when credentials are given) succeeded.
 * @param {string} [url] a ws:// or wss:// URL; defaults to this page's kvod.
 * @param {object} [options] `user` + `password`, or `token`; `events`; `reconnect`; `minimumDelay`,
 *   `maximumDelay`; `heartbeat`, `heartbeatTimeout`; `client`; `WebSocket` (an implementation to use).
 */
export async function connect(url, options = {}) {
  const client = new KVODClient(url ?? defaultURL(), options);
  await client.opened;
  return client;
}

/** One connection to kvod, kept open across drops. Create it with `connect`. */
export class KVODClient {
  constructor(url, options = {}) {
    this.url = url;
    this.options = { ...DEFAULT_OPTIONS, ...options };
    this.state = "connecting";     // connecting | open | reconnecting | closed
    this.connectionId = null;      // the server's connection id, from hello
    this.session = null;           // {id, grace} once startSession() succeeded; resumed on every reconnection
    this.onsessionlost = null;     // called with the session when a reconnection finds it ended
    this.server = null;            // {server, version, protocol}, from hello
    this.features = null;          // the protocol features the server announced in hello (`features`)
    this.user = null;
    this._socket = null;
    this._nextId = 1;
    this._pending = new Map();     // request id -> {resolve, reject, op}
    this._waiting = [];            // requests made while reconnecting: sent once resumed
    this._bySub = new Map();       // sub -> Observation
    this._observations = new Set();
    this._listeners = { state: new Set(), binding: new Set() };
    this._attempt = 0;
    this._timers = { retry: null, heartbeat: null, heartbeatDeadline: null };
    this.opened = new Promise((resolve, reject) => { this._openResolve = resolve; this._openReject = reject; });
    this.opened.catch(() => {});   // handled by connect(); never an unhandled rejection
    this._open();
  }

  /** Listens to `state` (the new state string) or `binding` (binding notices) events; returns a remover. */
  on(event, listener) {
    const set = this._listeners[event];
    if (!set) throw new TypeError(`unknown event '${event}'`);
    set.add(listener);
    return () => set.delete(listener);
  }

  // ---- Requests ----------------------------------------------------------------------------------------

  /** Sends `{op, ...params}` and resolves with the reply (without `id` and `ok`); rejects with KVODError. */
  request(op, params = {}, onReply = null) {
    if (this.state === "closed") return Promise.reject(new KVODError("closed", "the client is closed"));
    const feature = this._unannounced(op, params);
    if (feature !== null) {
      return Promise.reject(new KVODError("not_announced",
        `the server does not announce the protocol feature '${feature}' (hello's features): '${op}' was not sent`, { feature }));
    }
    return new Promise((resolve, reject) => {
      const entry = { op, params, resolve, reject, onReply };
      if (this.state === "open") this._send(entry); else this._waiting.push(entry);
    });
  }

  hello(params = {}) { return this.request("hello", params); }
  /** Logs in (`{user, password}` or `{token}`) and keeps the credentials to log in again after a reconnection. */
  async auth(credentials) {
    const reply = await this.request("auth", credentials);
    const { user, password, token } = credentials;
    Object.assign(this.options, token !== undefined ? { token, user: undefined, password: undefined }
                                                    : { user, password, token: undefined });
    this.user = reply.user;
    return reply;
  }
  ping() { return this.request("ping"); }
  /**
   * The writes take `conditions` last (docs/protocol.md "Conditional writes"): `{ ifExists: true }`,
   * `{ ifAbsent: true }`, `{ ifRev: rev }`, `{ ifEquals: { keyPath, value } }`, together or alone. One that does not hold
   * rejects with a KVODError of code `conflict` whose details say which and what is there now. `create` and `set`
   * also take `{ ttl: seconds }` there (docs/protocol.md "Expiry"): the object is deleted once that time passes
   * without a write or a `touch` (its observers get `sourceDeleted` with `cause: "expired"`); `ttl: 0` removes it.
   */
  create(object, values = {}, className, conditions = {}) {
    const params = className === undefined ? { object, values } : { object, values, class: className };
    return this.request("create", { ...params, ...conditions });
  }
  delete(object, conditions = {}) { return this.request("delete", { object, ...conditions }); }
  /**
   * Presence (docs/protocol.md "Presence"). `startSession({ grace })` begins this client's session (grace in
   * seconds; the server's default, 10, without one); every reconnection resumes it first, so a blip shorter
   * than the grace runs nothing. When it ends (the client gone longer, or `endSession()`), kvod runs its
   * `onDisconnect` writes with the user's rights at that moment and deletes the objects created with
   * `create(object, values, className, { ephemeral: true })`. A reconnection that finds it ended calls
   * `client.onsessionlost(session)`, and `client.session` is null until another begins.
   */
  async startSession({ grace } = {}) {
    const reply = await this.request("session", grace === undefined ? {} : { grace });
    this.session = { id: reply.session, grace: reply.grace };
    return this.session;
  }
  /** Registers `request` (a write as it would be sent alone, without `id`) to run when the session ends; resolves to its number. */
  async onDisconnect(request) { return (await this.request("onDisconnect", { request })).action; }
  /** Drops the action numbered `action` (every action without one); resolves to how many went. */
  async cancelOnDisconnect(action) {
    return (await this.request("cancelOnDisconnect", action === undefined ? {} : { action })).cancelled;
  }
  /** Ends the session now: its actions run, its ephemeral objects go; resolves to how many writes ran. */
  async endSession() {
    const reply = await this.request("endSession");
    this.session = null;
    return reply.ran;
  }
  /**
   * Sends `value` to the observers of `object` (docs/protocol.md "Signals"): each gets a change of reason `signal`
   * whose `new` is the value; nothing is stored and no revision is taken. Needs `write` on the object; rejects with
   * `not_found` when it does not exist, `too_large` past 64 KiB, `rate_limited` past 100 at once then 100 a second
   * (`details.retryAfter`: milliseconds).
   */
  async signal(object, value) { await this.request("signal", { object, value }); }
  /** Starts `object`'s time to live again from now; resolves with `{ expiresAt, rev }` (`expiresAt`: ms since 1970, null without a ttl). */
  touch(object) { return this.request("touch", { object }); }
  /** The value at `keyPath` (the whole object without one). */
  async get(object, keyPath) {
    const reply = await this.request("get", keyPath === undefined ? { object } : { object, keyPath });
    return reply.value;
  }
  set(object, keyPath, value, conditions = {}) { return this.request("set", { object, keyPath, value, ...conditions }); }
  /**
   * Read-modify-write without losing a concurrent writer's update: reads the value at `keyPath`, sets
   * `transform(value)` (`undefined` for a missing key or null) with `ifEquals` on what was read, and on
   * `conflict` calls `transform` again, at most `maxAttempts` times: at once with the value the conflict
   * reports for the first retries, then after a random pause (up to 2 ms) with the value read again, so that
   * a writer losing to another in step falls out of step. Resolves to `{ value, rev }`; `transform` may run
   * more than once, and throwing from it writes nothing.
   */
  async update(object, keyPath, transform, { maxAttempts = 100 } = {}) {
    let current = await this.get(object, keyPath);
    for (let attempt = 1; ; attempt++) {
      const value = transform(current === null ? undefined : current);
      try {
        const reply = await this.set(object, keyPath, value, { ifEquals: { keyPath, value: current } });
        return { value, rev: reply.rev };
      } catch (error) {
        if (!(error instanceof KVODError) || error.code !== "conflict" || attempt >= maxAttempts
            || error.details.exists === false || !("value" in error.details)) throw error;
        if (attempt < 4) {
          current = error.details.value;
        } else {
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 2));
          current = await this.get(object, keyPath);
        }
      }
    }
  }
  /** Adds `by` (default 1) to the number at `keyPath`, atomically; resolves to `{ value, rev }`. */
  increment(object, keyPath, by = 1, conditions = {}) { return this.request("increment", { object, keyPath, by, ...conditions }); }
  /**
   * Applies `ops` all or nothing with one revision (docs/protocol.md "Batches"): each an object as its request
   * would be sent alone, without `id` (`{ op: "set", object, keyPath, value, ifEquals }`). Resolves to
   * `{ rev, results }` (each part's reply without `rev`: `{}`, or `{ value }` for an increment); a refused part
   * rejects with that part's KVODError, whose `details.part` is its index, and nothing was written.
   */
  batch(ops) { return this.request("batch", { ops }); }
  /** Inserts `values` (an array) at `index` (appends without one). */
  insert(object, keyPath, values, index) {
    return this.request("insert", index === undefined ? { object, keyPath, values } : { object, keyPath, values, index });
  }
  /** Removes the elements at `indexes` (a number or an array of numbers). */
  remove(object, keyPath, indexes) {
    return this.request("remove", { object, keyPath, indexes: [].concat(indexes) });
  }
  /** Replaces the element at `index` with `value`. */
  replace(object, keyPath, index, value) { return this.request("replace", { object, keyPath, index, value }); }
  /** Every object id, paged by `limit` and `after` as the protocol pages `list`. */
  async list({ limit, after } = {}) {
    const objects = [];
    for (;;) {
      const params = {};
      if (limit !== undefined) params.limit = limit;
      if (after !== undefined) params.after = after;
      const reply = await this.request("list", params);
      objects.push(...reply.objects);
      if (!reply.more || limit === undefined || reply.objects.length === 0) return objects;
      after = reply.objects[reply.objects.length - 1];
    }
  }
  info(object) { return this.request("info", { object }); }
  async classes() { return (await this.request("classes")).classes; }
  defineClass(definition) { return this.request("defineClass", { class: definition }); }
  async bindings() { return (await this.request("bindings")).bindings; }
  bind(definition) { return this.request("bind", definition); }
  unbind(binding) { return this.request("unbind", { binding }); }

  // ---- Observations ------------------------------------------------------------------------------------

  /**
   * Observes `keyPath` on `target`: an object id, or `{pattern: "prefix*"}` for every object whose id
   * matches (without a key path: their creations and deletions), or `{pattern, where: "status == 'open'"}`
   * for a live query: only the matching objects on which the expression holds, with `entered` and `left`
   * changes as objects come into the set and go (a resumed live query answers with `resync`: the set as it
   * is then). Returns an Observation, an async iterable
   * of changes; `await observation.ready` for the reply (it rejects with the server's refusal).
   * @param {object} [params] `options` (array of "new", "old", "initial", "prior"; default ["new"]),
   *   `sinceRev` (resume after that revision).
   */
  observe(target, keyPath, params = {}) {
    const observation = new Observation(this, target, keyPath, params);
    this._observations.add(observation);
    observation._start(params.sinceRev);
    return observation;
  }

  /**
   * Calls `callback(change)` for every change of `keyPath` on `target` (as `observe`), in order, and
   * returns a function that ends the subscription (calling it twice is harmless). `onError(error)` hears
   * of a refused observe; by default the refusal is logged.
   */
  subscribe(target, keyPath, callback, params = {}, onError = (error) => console.error("kvod.js:", error)) {
    const observation = this.observe(target, keyPath, params);
    observation._callback = callback;
    observation.ready.catch(onError);
    return () => observation.unsubscribe();
  }

  /** Closes the connection for good: pending requests are rejected, observations end. */
  close() {
    if (this.state === "closed") return;
    this._setState("closed");
    this._clearTimers();
    const error = new KVODError("closed", "the client was closed");
    this._failPending(error);
    for (const entry of this._waiting.splice(0)) entry.reject(error);
    for (const observation of [...this._observations]) observation._finish(null);
    this._openReject(error);
    const socket = this._socket;
    this._socket = null;
    if (socket) { try { socket.close(1000); } catch { /* already closing */ } }
  }

  // ---- Connection --------------------------------------------------------------------------------------

  _open() {
    const Impl = this.options.WebSocket ?? globalThis.WebSocket;
    if (!Impl) throw new KVODError("closed", "no WebSocket implementation (node 22+, or pass options.WebSocket)");
    let socket;
    try {
      socket = new Impl(this.url);
    } catch (error) {
      if (this.state === "connecting") { this._openReject(error); this.close(); return; }
      this._scheduleReconnect();
      return;
    }
    this._socket = socket;
    socket.onopen = () => this._handshake(socket);
    socket.onmessage = (message) => this._receive(message.data);
    socket.onclose = (event) => this._dropped(socket, event);
    // Browsers follow an error with close; some implementations (node 20's) do not when the connection
    // was refused. Either way the socket is finished: the second of the two calls finds it already dropped.
    socket.onerror = () => {
      this._dropped(socket, { code: 1006, reason: "connection error" });
      try { socket.close(); } catch { /* not open */ }
    };
  }

  /**
   * The protocol feature `op` with `params` needs that the server did not announce in hello's `features`, or null
   * (docs/protocol.md "Operations": kvod refuses a field it does not know, so an optional field is sent only when
   * the server announced it). Looks into a batch's `ops` and an onDisconnect's `request` too.
   */
  _unannounced(op, params) {
    const announced = this.features ?? [];
    const byOp = { session: "sessions", onDisconnect: "sessions", cancelOnDisconnect: "sessions", endSession: "sessions",
                   signal: "signals" };
    if (byOp[op] !== undefined && !announced.includes(byOp[op])) return byOp[op];
    for (const [key, value] of Object.entries(params ?? {})) {
      if (value === undefined) continue;
      const feature = FEATURE_OF_FIELD[key];
      if (feature !== undefined && !announced.includes(feature)) return feature;
    }
    const parts = [...(Array.isArray(params?.ops) ? params.ops : []), ...(params?.request ? [params.request] : [])];
    for (const part of parts) {
      if (part !== null && typeof part === "object") {
        const missing = this._unannounced(part.op ?? op, part);
        if (missing !== null) return missing;
      }
    }
    return null;
  }

  async _handshake(socket) {
    try {
      const hello = await this._direct("hello", { client: this.options.client, events: this.options.events });
      this.connectionId = hello.connection;
      this.server = { server: hello.server, version: hello.version, protocol: hello.protocol };
      this.features = Array.isArray(hello.features) ? hello.features : [];  // what the server accepts beyond the basics
      this.events = hello.events ?? "full";
      const { user, password, token } = this.options;
      if (token !== undefined) this.user = (await this._direct("auth", { token })).user;
      else if (user !== undefined) this.user = (await this._direct("auth", { user, password })).user;
      // The session goes on before anything queued (a queued request may depend on it). Not found: it ended
      // while the client was away (its actions ran); the client has none until it begins another.
      if (this.session) {
        try {
          await this._direct("session", { resume: this.session.id });
        } catch (error) {
          if (!(error instanceof KVODError) || error.code !== "not_found") throw error;
          const lost = this.session;
          this.session = null;
          if (this.onsessionlost) this.onsessionlost(lost);
        }
      }
      // Resume live observations before anything queued, so that their replayed changes come first.
      await Promise.all([...this._observations].map((observation) => observation._resume()));
    } catch (error) {
      if (socket !== this._socket || this.state === "closed") return;
      if (this.state === "connecting" || (error instanceof KVODError && error.code === "unauthenticated")) {
        // Wrong credentials do not get better by retrying.
        this._openReject(error);
        this.close();
        return;
      }
      try { socket.close(); } catch { /* closing */ }
      return;
    }
    if (socket !== this._socket || this.state === "closed") return;
    this._attempt = 0;
    this._setState("open");
    this._startHeartbeat();
    for (const entry of this._waiting.splice(0)) this._send(entry);
    this._openResolve(this);
  }

  /** A request sent now, even before the connection counts as open (the handshake's own requests). */
  _direct(op, params, onReply = null) {
    return new Promise((resolve, reject) => this._send({ op, params, resolve, reject, onReply }));
  }

  _send(entry) {
    const id = this._nextId++;
    this._pending.set(id, entry);
    try {
      this._socket.send(requestText({ ...entry.params, op: entry.op, id }));
    } catch (error) {
      this._pending.delete(id);
      entry.reject(new KVODError("connection_lost", `'${entry.op}' could not be sent: ${error.message}`));
    }
  }

  _dropped(socket, event) {
    if (socket !== this._socket) return;
    this._socket = null;
    this._clearTimers();
    this._failPending(new KVODError("connection_lost",
      `the connection closed (code ${event?.code ?? "unknown"}${event?.reason ? ": " + event.reason : ""})`));
    for (const observation of this._observations) observation._detach();
    if (this.state === "closed") return;
    if (this.state === "connecting" || !this.options.reconnect) {
      // The first connection failing is an answer for connect(); reconnecting is for connections that worked.
      this._openReject(new KVODError("closed", `the connection closed (code ${event?.code ?? "unknown"})`));
      this.close();
      return;
    }
    this._scheduleReconnect();
  }

  _scheduleReconnect() {
    this._setState("reconnecting");
    const ceiling = Math.min(this.options.maximumDelay, this.options.minimumDelay * 2 ** this._attempt);
    this._attempt = Math.min(this._attempt + 1, 30);
    const delay = ceiling / 2 + Math.random() * ceiling / 2;   // "equal jitter"
    this._timers.retry = setTimeout(() => { this._timers.retry = null; this._open(); }, delay);
  }

  _startHeartbeat() {
    if (!this.options.heartbeat) return;
    this._timers.heartbeat = setInterval(() => {
      if (this._timers.heartbeatDeadline) return;
      const socket = this._socket;
      this._timers.heartbeatDeadline = setTimeout(() => {
        // No answer: the connection is half-open. Closing it starts a reconnection.
        if (socket === this._socket) { try { socket.close(); } catch { /* closing */ } this._dropped(socket, { code: 4000, reason: "no answer to ping" }); }
      }, this.options.heartbeatTimeout);
      this._direct("ping", {}).then(() => {
        clearTimeout(this._timers.heartbeatDeadline);
        this._timers.heartbeatDeadline = null;
      }, () => {});
    }, this.options.heartbeat);
  }

  _clearTimers() {
    clearTimeout(this._timers.retry);
    clearInterval(this._timers.heartbeat);
    clearTimeout(this._timers.heartbeatDeadline);
    this._timers = { retry: null, heartbeat: null, heartbeatDeadline: null };
  }

  _failPending(error) {
    const pending = [...this._pending.values()];
    this._pending.clear();
    for (const entry of pending) entry.reject(error);
  }

  _setState(state) {
    if (this.state === state) return;
    this.state = state;
    for (const listener of this._listeners.state) listener(state);
  }

  _receive(data) {
    // Any message shows that the server is there: a ping waiting for its answer no longer means a dead connection.
    if (this._timers.heartbeatDeadline) {
      clearTimeout(this._timers.heartbeatDeadline);
      this._timers.heartbeatDeadline = null;
    }
    let message;
    try { message = JSON.parse(data); } catch { return; }
    if (message === null || typeof message !== "object") return;
    if ("ok" in message) {
      const entry = this._pending.get(message.id);
      if (!entry) return;
      this._pending.delete(message.id);
      if (message.ok) {
        const { id, ok, ...reply } = message;
        // An observation's events may follow its reply in the same read: it is registered now, not a microtask later.
        if (entry.onReply) entry.onReply(reply);
        entry.resolve(reply);
      } else {
        const { code = "protocol", message: text = "request failed", ...details } = message.error ?? {};
        entry.reject(new KVODError(code, text, details));
      }
      return;
    }
    if (message.event === "binding") {
      for (const listener of this._listeners.binding) listener(message);
      return;
    }
    const sub = message.event === "change" ? message.sub : message.s;
    const observation = this._bySub.get(sub);
    if (observation) observation._deliver(message);
  }
}
