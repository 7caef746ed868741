// ---- Observations (kvod/observation.js) ----------------------------------------------------------------

/**
 * One observation: an async iterable of changes, also delivered to a callback when made with `subscribe`.
 * A change is `{reason, kind, new?, old?, indexes?, isPrior, rev, object, keyPath, sub}` (`new`/`old`
 * present exactly when the server sent them). A signal sent to the observed object (`client.signal`) comes as a
 * change of reason `signal`: `new` is its payload, `keyPath` null; it is no value of the key path. The iteration ends after a `sourceDeleted` or `forbidden`
 * change (kvod ended the subscription) or `unsubscribe()`. `rev` is the revision it has seen up to, which
 * is where it resumes after a reconnection.
 */
export class Observation {
  constructor(client, target, keyPath, params) {
    this.client = client;
    this.target = target;
    this.object = typeof target === "string" ? target : null;
    this.pattern = typeof target === "object" && target !== null ? target.pattern : null;
    this.where = typeof target === "object" && target !== null ? target.where ?? null : null;
    this.keyPath = keyPath ?? null;
    this.options = params.options ?? ["new"];
    this.sub = null;
    this.rev = null;
    this.ended = false;
    this._callback = null;
    this._buffer = [];
    this._waiters = [];
    this.ready = new Promise((resolve, reject) => { this._readyResolve = resolve; this._readyReject = reject; });
  }

  /** Ends the observation (an `unobserve` when it is live); harmless twice. */
  unsubscribe() {
    if (this.ended) return;
    const sub = this.sub;
    this._finish(null);
    if (sub !== null && this.client.state === "open") this.client.request("unobserve", { sub }).catch(() => {});
  }

  [Symbol.asyncIterator]() {
    return {
      next: () => {
        if (this._buffer.length > 0) return Promise.resolve({ value: this._buffer.shift(), done: false });
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => this._waiters.push({ resolve, reject }));
      },
      return: () => { this.unsubscribe(); return Promise.resolve({ value: undefined, done: true }); },
    };
  }

  _params(sinceRev) {
    const params = this.pattern !== null ? { pattern: this.pattern } : { object: this.object };
    if (this.keyPath !== null) params.keyPath = this.keyPath;
    if (this.where !== null) params.where = this.where;
    params.options = sinceRev == null ? this.options : this.options.filter((option) => option !== "initial");
    if (sinceRev != null) params.sinceRev = sinceRev;
    return params;
  }

  async _start(sinceRev) {
    try {
      const reply = await this.client.request("observe", this._params(sinceRev), (reply) => {
        if (!this.ended) this._attach(reply);
      });
      if (this.ended) { this.client.request("unobserve", { sub: reply.sub }).catch(() => {}); return; }
      this._readyResolve(this);
    } catch (error) {
      if (error.code === "connection_lost" && this.client.state === "reconnecting" && !this.ended) {
        this._start(sinceRev);   // an observe that got no answer made nothing: ask again once reconnected
        return;
      }
      this._readyReject(error);
      this._finish(error);
    }
  }

  /** After a reconnection: observe again from the last revision seen. Called by the client. */
  async _resume() {
    if (this.ended || this.rev === null) return;
    try {
      await this.client._direct("observe", this._params(this.rev), (reply) => { if (!this.ended) this._attach(reply); });
    } catch (error) {
      if (error.code === "connection_lost") throw error;
      this._finish(error);   // the object is gone, or no longer readable: the observation ends with the reason
    }
  }

  _attach(reply) {
    this.sub = reply.sub;
    if (this.rev === null) this.rev = reply.rev;
    this.client._bySub.set(reply.sub, this);
  }

  _detach() {
    if (this.sub !== null) this.client._bySub.delete(this.sub);
  }

  _deliver(message) {
    const change = decodeChange(message, this);
    // A prior notification's change is not delivered yet: resuming from its rev would skip the change itself.
    // A signal changes nothing: where to resume stays where the changes left it.
    if (!change.isPrior && change.reason !== "signal" && change.rev > this.rev) this.rev = change.rev;
    this._push(change);
    if (change.isPrior) return;
    if (change.reason === "sourceDeleted" && this.pattern === null) this._finish(null);
    else if (change.reason === "forbidden") this._finish(null);
  }

  _push(change) {
    if (this._callback) {
      try { this._callback(change); } catch (error) { console.error("kvod.js: a subscriber's callback threw", error); }
      return;
    }
    const waiter = this._waiters.shift();
    if (waiter) waiter.resolve({ value: change, done: false }); else this._buffer.push(change);
  }

  _finish(error) {
    if (this.ended) return;
    this.ended = true;
    this._detach();
    this.client._observations.delete(this);
    for (const waiter of this._waiters.splice(0)) {
      if (error) waiter.reject(error); else waiter.resolve({ value: undefined, done: true });
    }
  }
}
