// flint:long the pull worker's loops (claim, run, heartbeat, finish, drain) share one state and read best together
// The pull worker: register, claim in batches with long polls, run
// handlers, heartbeat every lease held, send outcomes in batches, stop
// gracefully. It follows the reference Python worker (clients/python)
// step for step; the conformance suite (internal/e2e) holds both to the
// same wire contract.

import os from "node:os";
import { backoff, baseURL, FlintError, NetworkError, request } from "./http.js";
import { VERSION } from "./client.js";
import { Cancel, cut, Fail, Job, JobStopped, outcomeOf, Retry, StepOrderChanged, Suspend } from "./job.js";

const MAX_CLAIM = 100; // the API's limit on one claim
const MAX_OUTCOMES = 1000; // the API's limit on one finish
const SHORT_POLL = 2; // seconds a claim waits while the worker holds jobs
const LEVELS = { debug: 10, info: 20, warn: 30, warning: 30, error: 40 };

/** Resolves after ms, or at once when signal aborts. */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, Math.max(0, ms));
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** A condition: wait() resolves at the next notify() (or after ms). */
class Changed {
  #waiters = new Set();
  wait(ms) {
    return new Promise((resolve) => {
      const w = () => {
        clearTimeout(t);
        this.#waiters.delete(w);
        resolve();
      };
      const t = setTimeout(w, ms);
      this.#waiters.add(w);
    });
  }
  notify() {
    for (const w of [...this.#waiters]) w();
  }
}

/** A logger writing "time LEVEL flint_worker: message" lines to stderr. */
export function consoleLogger(level = "info") {
  const min = LEVELS[String(level).toLowerCase()] ?? LEVELS.info;
  const out = (name, n) => (msg) => {
    if (n >= min) process.stderr.write(`${new Date().toISOString()} ${name} flint_worker: ${msg}\n`);
  };
  return { debug: out("DEBUG", 10), info: out("INFO", 20), warn: out("WARNING", 30), error: out("ERROR", 40) };
}

/** checkSchema returns schema if it is a JSON Schema object JSON can carry. */
function checkSchema(type, schema) {
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) {
    throw new TypeError(`the schema of ${JSON.stringify(type)} must be a JSON Schema object`);
  }
  JSON.stringify(schema); // throws on what JSON cannot hold
  return schema;
}

/** A pull worker: register handlers with handle(), then run(). */
export class Worker {
  constructor({
    url, apiKey, name, queues, concurrency = 10, prefetch = 0, claimers = 1, waitSeconds = 20, shutdownTimeout = 30,
    handlers, schemas, version, logger,
  } = {}) {
    this.url = baseURL(url || process.env.FLINT_URL || "http://localhost:8080");
    this.apiKey = apiKey || process.env.FLINT_API_KEY;
    if (!this.apiKey) throw new TypeError("an API key with the work scope is required (apiKey or FLINT_API_KEY)");
    if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError("concurrency must be an integer of at least 1");
    if (!(Number.isInteger(prefetch) && prefetch >= 0)) throw new RangeError("prefetch must be an integer of 0 or more");
    if (!(Number.isInteger(claimers) && claimers >= 1 && claimers <= 8)) throw new RangeError("claimers must be between 1 and 8");
    if (!(waitSeconds >= 0 && waitSeconds <= 30)) throw new RangeError("waitSeconds must be between 0 and 30");
    if (!(shutdownTimeout >= 0)) throw new RangeError("shutdownTimeout must be 0 or more");
    this.name = name || `${os.hostname()}:${process.pid}`;
    this.queues = queues ? [...queues] : [];
    this.concurrency = concurrency;
    this.prefetch = prefetch;
    this.claimers = claimers;
    this.waitSeconds = waitSeconds;
    this.shutdownTimeout = shutdownTimeout;
    this.handlers = new Map(Object.entries(handlers ?? {}));
    this.schemas = new Map();
    for (const [type, schema] of Object.entries(schemas ?? {})) this.schemas.set(type, checkSchema(type, schema));
    if (version !== undefined && typeof version !== "string") throw new TypeError("version must be a string");
    this.version = version;
    this.log = logger ?? consoleLogger(process.env.FLINT_LOG_LEVEL || "info");
    this.id = null;
    this.heartbeatSeconds = 5;
    this.leaseSeconds = 30;
    this.stats = { claimed: 0, completed: 0, failed: 0, cancelled: 0, lost: 0 };
    this._ua = `flint-worker-node/${VERSION} (Node ${process.versions.node})`;
    this._held = new Map(); // job id → Job: claimed and not yet finished
    this._local = []; // claimed jobs no handler has picked up
    this._running = 0; // handlers running
    this._asking = 0; // jobs asked for by claims in flight
    this._finishing = 0; // held jobs whose outcome is on its way to Flint
    this._quiet = false; // an operator asked for quiet
    this._stopping = new AbortController(); // stop claiming (graceful)
    this._aborting = new AbortController(); // stop now
    this._changed = new Changed(); // held, local or quiet changed
    this._claims = new Map(); // claims in flight: AbortController → short poll?
    this._outcomes = []; // [job, outcome] not yet sent
    this._outcomesChanged = new Changed();
    this._beatNow = new Changed();
    this._beatAsked = false;
    this._registering = null;
  }

  /**
   * Registers fn as the handler of jobs of that type; returns the worker.
   * options.schema, a JSON Schema of the payload, is declared when the
   * worker registers: every Flint API process then refuses a payload that
   * does not fit it with a 422 naming the field.
   */
  handle(type, fn, { schema } = {}) {
    if (typeof fn !== "function") throw new TypeError(`the handler of ${JSON.stringify(type)} must be a function`);
    if (this.handlers.has(type)) throw new TypeError(`a handler for ${JSON.stringify(type)} is registered already`);
    if (schema !== undefined) this.schemas.set(type, checkSchema(type, schema));
    this.handlers.set(type, fn);
    return this;
  }

  get #stopped() {
    return this._stopping.signal.aborted;
  }

  get #aborted() {
    return this._aborting.signal.aborted;
  }

  /**
   * Asks the worker to stop: claim nothing more and finish what it holds,
   * or (now) hand what it holds back at once.
   */
  stop({ now = false } = {}) {
    this._stopping.abort();
    if (now) this._aborting.abort();
    this.#beatSoon();
    this._changed.notify();
    // A long poll in flight ends now (deregistration hands back whatever it
    // claimed meanwhile); a short poll is let finish and what it brings runs.
    this.#abortClaims(now);
  }

  #abortClaims(shortToo = true) {
    for (const [ctl, short] of this._claims) if (shortToo || !short) ctl.abort();
  }

  /** Registers, works until stopped (SIGTERM, SIGINT, an operator's terminate, stop()), deregisters; resolves to the stats. */
  async run({ installSignals = true } = {}) {
    if (this.handlers.size === 0) throw new TypeError('no handlers registered: use worker.handle("type", fn)');
    const remove = installSignals ? this.#installSignals() : () => {};
    try {
      if (!(await this.#register())) return this.stats;
      const beats = this.#guard("heartbeat", this.#heartbeatLoop());
      const finishes = this.#guard("finish", this.#finishLoop());
      const claims = Array.from({ length: this.claimers }, () => this.#guard("claim", this.#claimLoop()));
      await Promise.all(claims);
      this.log.info(`stopping: no more claims; ${this._held.size} job(s) held`);
      await this.#drain();
      this._outcomesChanged.notify();
      this._beatNow.notify();
      await Promise.all([beats, finishes]);
      await this.#deregister();
      return this.stats;
    } finally {
      remove();
    }
  }

  /** A loop that fails is a bug: it stops the worker at once rather than leaving it half-working. */
  #guard(name, loop) {
    return loop.catch((e) => {
      this.log.error(`${name} failed; stopping the worker: ${e?.stack ?? e}`);
      this.stop({ now: true });
    });
  }

  #installSignals() {
    const on = (sig) => {
      if (this.#stopped) {
        this.log.warn(`second ${sig}: stopping now`);
        this.stop({ now: true });
      } else {
        this.log.info(`${sig}: finishing the jobs held, then stopping (again to stop now)`);
        this.stop();
      }
    };
    process.on("SIGTERM", on);
    process.on("SIGINT", on);
    return () => {
      process.off("SIGTERM", on);
      process.off("SIGINT", on);
    };
  }

  /** Waits for the jobs held to finish (up to shutdownTimeout); what is left goes back to Flint. */
  async #drain() {
    const deadline = performance.now() + this.shutdownTimeout * 1000;
    while (this._held.size && !this.#aborted) {
      const left = deadline - performance.now();
      if (left <= 0) {
        this.log.warn(`shutdown timeout: ${this._held.size} job(s) still running go back to Flint`);
        break;
      }
      await this._changed.wait(Math.min(left, 500));
    }
    for (const job of this._held.values()) job._stop("the worker is stopping");
    this._local = [];
    this._aborting.abort();
  }

  // --- API calls ---

  #request(method, path, body, opts) {
    return request(this.url, this.apiKey, this._ua, method, path, body, opts);
  }

  /** One API call; network errors and 5xx/429 answers are retried with backoff while retryWhile() holds. */
  async #call(method, path, body, { timeoutMs = 30000, retryWhile } = {}) {
    for (let attempt = 0; ; attempt++) {
      try {
        return (await this.#request(method, path, body, { timeoutMs })).data;
      } catch (e) {
        if (e instanceof FlintError && !e.retryable) throw e;
        if (!retryWhile || !retryWhile()) throw e;
        let delay = backoff(attempt);
        if (e instanceof FlintError && e.retryAfter) delay = Math.max(delay, Math.min(e.retryAfter, 60));
        this.log.warn(`${method} ${path} failed (${e.message}); again in ${delay.toFixed(1)}s`);
        await sleep(delay * 1000, this._aborting.signal);
      }
    }
  }

  async #register() {
    const body = {
      name: this.name,
      types: [...this.handlers.keys()].sort(),
      concurrency: this.concurrency,
      language: "typescript",
      version: this.version
        ? `${this.version} (Node ${process.versions.node}, flint worker ${VERSION})`
        : `Node ${process.versions.node} (flint worker ${VERSION})`,
    };
    const schemas = Object.fromEntries([...this.schemas].filter(([type]) => this.handlers.has(type)));
    if (Object.keys(schemas).length) body.schemas = schemas;
    if (this.queues.length) body.queues = this.queues;
    let got;
    try {
      got = await this.#call("POST", "/api/v1/workers", body, { retryWhile: () => !this.#stopped });
    } catch (e) {
      if (this.#stopped) return false;
      throw e;
    }
    this.id = got.id;
    this.heartbeatSeconds = Number(got.heartbeat_seconds) || 5;
    this.leaseSeconds = Number(got.lease_seconds) || 30;
    this.log.info(`registered as ${this.id}: types ${body.types.join(", ")}, queues ${(got.queues || []).join(", ") || "all"}`);
    return true;
  }

  async #deregister() {
    if (this.id === null) return;
    try {
      const got = await this.#call("DELETE", `/api/v1/workers/${this.id}`, undefined, { timeoutMs: 10000 });
      this.log.info(`deregistered ${this.id} (${got.released ?? 0} job(s) handed back)`);
    } catch (e) {
      if (!(e instanceof FlintError && e.status === 404)) {
        this.log.warn(`deregistering ${this.id} failed: ${e.message}; its leases expire on their own`);
      }
    }
  }

  // --- claiming ---

  /**
   * How many jobs the worker may claim now, or 0 when a claim should wait.
   * A job whose outcome is on its way to Flint no longer takes a slot (its
   * lease is still heartbeated until Flint answers), so claims overlap
   * finishes; at most twice the capacity is held.
   */
  #room() {
    const capacity = this.concurrency + this.prefetch;
    const busy = this._held.size - this._finishing;
    const room = Math.min(capacity - busy, 2 * capacity - this._held.size) - this._asking;
    if (room <= 0) return 0;
    if ((this._local.length || this._asking) && room < Math.max(1, Math.floor(capacity / 2))) return 0;
    return Math.min(room, MAX_CLAIM);
  }

  async #claimLoop() {
    let attempt = 0;
    while (!this.#stopped) {
      while (!this.#stopped && (this._quiet || this.#room() === 0)) await this._changed.wait(500);
      if (this.#stopped) break;
      const n = this.#room();
      const busy = this._held.size > 0;
      this._asking += n;
      const wait = busy ? Math.min(this.waitSeconds, SHORT_POLL) : this.waitSeconds;
      const ctl = new AbortController();
      this._claims.set(ctl, wait <= SHORT_POLL);
      const workerID = this.id;
      let got;
      try {
        got = (await this.#request("POST", `/api/v1/workers/${workerID}/claim`, { max: n, wait_seconds: wait }, {
          signal: ctl.signal, timeoutMs: (wait + 30) * 1000,
        })).data;
        attempt = 0;
      } catch (e) {
        if (this.#stopped) break;
        if (e instanceof FlintError && e.status === 404) {
          await this.#lostRegistration(workerID);
          continue;
        }
        if (e instanceof FlintError && !e.retryable) this.log.error(`claim refused: ${e.message}`);
        const delay = Math.max(backoff(attempt++), e instanceof FlintError ? e.retryAfter ?? 0 : 0);
        if (!(e instanceof FlintError)) this.log.warn(`claim failed (${e.message}); again in ${delay.toFixed(1)}s`);
        await sleep(delay * 1000, this._stopping.signal);
        continue;
      } finally {
        this._claims.delete(ctl);
        this._asking -= n;
        this._changed.notify();
      }
      const jobs = (got.jobs || []).map((d) => new Job(d, this.#hooks));
      for (const j of jobs) {
        // Flint gave back a job this worker still runs: its earlier lease
        // was lost (expired or reaped) and that run must stop.
        const old = this._held.get(j.id);
        if (old) this.#lose(old, "its lease was lost and Flint handed the job out again");
        this._held.set(j.id, j);
      }
      this.stats.claimed += jobs.length;
      this._local.push(...jobs);
      this.#startHandlers();
    }
  }

  #hooks = {
    beatSoon: () => this.#beatSoon(),
    recordStep: (job, name, result, started) => this.#recordStep(job, name, result, started),
    logged: (job, level, message) => this.log[level === "warn" ? "warn" : level](`job ${job.id}: ${message}`),
  };

  /** Records a durable step under the job's lease; a lease lost meanwhile stops the job (JobStopped). */
  async #recordStep(job, name, result, started) {
    const body = { lease_token: job.lease_token, name, result };
    if (started) body.started_at = started.toISOString(); // the step's span and page start there
    try {
      return await this.#call("POST", `/api/v1/jobs/${job.id}/steps`, body, {
        retryWhile: () => !job.stopped,
      });
    } catch (e) {
      if (e instanceof FlintError && e.code === "lease_lost") {
        this.#lose(job, `its lease was lost; step ${JSON.stringify(name)} was not recorded`);
        throw new JobStopped(`job ${job.id}: its lease was lost; step ${JSON.stringify(name)} was not recorded`);
      }
      throw e;
    }
  }

  /** Flint no longer knows this worker (an operator deregistered it): drop its jobs and register again. */
  async #lostRegistration(workerID) {
    if (this._registering) return this._registering;
    if (this.id !== workerID) return;
    this._registering = (async () => {
      for (const job of [...this._held.values()]) this.#lose(job, "the worker's registration was removed");
      this.log.warn(`Flint no longer knows worker ${this.id}; registering again`);
      await this.#register();
    })();
    try {
      await this._registering;
    } finally {
      this._registering = null;
    }
  }

  // --- running handlers ---

  #startHandlers() {
    while (this._running < this.concurrency && this._local.length) {
      const job = this._local.shift();
      if (job.stopped) continue; // lost before it started
      this._running++;
      this.#guard("handler runner", this.#runJob(job)).finally(() => {
        this._running--;
        this._changed.notify();
        this.#startHandlers();
      });
    }
  }

  async #runJob(job) {
    const fn = this.handlers.get(job.type);
    let result, err, threw = false;
    try {
      if (!fn) throw new Fail(`this worker has no handler for job type ${JSON.stringify(job.type)}`);
      result = await fn(job);
    } catch (e) {
      if (e instanceof JobStopped || job.stopped) return;
      threw = true;
      err = e;
      if (!(e instanceof Retry || e instanceof Fail || e instanceof Cancel || e instanceof Suspend || e instanceof StepOrderChanged)) {
        job.log(e instanceof Error ? e.stack || String(e) : `thrown: ${String(e)}`, undefined, "error");
      }
    }
    if (job.stopped) return;
    await this.#sendLines(job, true);
    this.#finish(job, outcomeOf(job, result, err, threw));
  }

  /** Sends the job's buffered log lines; with retry, a failed request is tried again for up to 30 s. */
  async #sendLines(job, retry) {
    const deadline = performance.now() + 30000;
    for (;;) {
      const lines = job._takeLines();
      if (!lines.length) return;
      try {
        await this.#call("POST", `/api/v1/jobs/${job.id}/logs`, { lease_token: job.lease_token, lines }, {
          retryWhile: retry ? () => !this.#aborted && !job.stopped && performance.now() < deadline : undefined,
        });
      } catch (e) {
        if (!(e instanceof FlintError && e.code === "lease_lost")) {
          this.log.warn(`job ${job.id}: ${lines.length} log line(s) not sent: ${e.message}`);
        }
        return;
      }
    }
  }

  #finish(job, outcome) {
    if (job._outcomeSent) return;
    job._outcomeSent = true;
    job._finishing = true;
    this._finishing++;
    this._changed.notify();
    this._outcomes.push([job, outcome]);
    this._outcomesChanged.notify();
  }

  /** Forgets job, unless a newer claim of the same id replaced it; reports whether it was held. */
  #release(job) {
    if (job._finishing) {
      job._finishing = false;
      this._finishing--;
    }
    if (this._held.get(job.id) !== job) return false;
    this._held.delete(job.id);
    return true;
  }

  /** The worker no longer holds job: stop it, drop its result. */
  #lose(job, why) {
    job._stop(why);
    const sent = job._outcomeSent;
    job._outcomeSent = true;
    if (this.#release(job) && !sent) this.stats.lost++;
    this._changed.notify();
    if (!sent) this.log.warn(`job ${job.id} (${job.type}, attempt ${job.attempt}) stopped: ${why}; its result is dropped`);
  }

  // --- finishing ---

  /** Sends outcomes in batches: whatever piled up while the last request was in flight goes in the next. */
  async #finishLoop() {
    for (;;) {
      if (!this._outcomes.length) {
        if (this.#aborted) return;
        await this._outcomesChanged.wait(1000);
        continue;
      }
      const batch = this._outcomes.splice(0, MAX_OUTCOMES);
      await this.#sendOutcomes(batch);
    }
  }

  async #sendOutcomes(batch) {
    for (let attempt = 0; batch.length; ) {
      let err, delay;
      try {
        const { data } = await this.#request("POST", `/api/v1/workers/${this.id}/finish`, { outcomes: batch.map(([, o]) => o) }, { timeoutMs: 60000 });
        const results = data.outcomes || [];
        batch.forEach(([job, o], i) => {
          const r = results[i] || {};
          this.#done(job, r.ok ? o.status : null, r.error || "");
        });
        return;
      } catch (e) {
        if (e instanceof FlintError && e.status === 422) {
          batch = this.#amend(batch, e);
          continue;
        }
        if (e instanceof FlintError && e.status === 404) {
          for (const [job] of batch) this.#done(job, null, "the worker's registration was removed");
          return;
        }
        err = e;
        delay = Math.max(backoff(attempt), e instanceof FlintError ? e.retryAfter ?? 0 : 0);
      }
      // Not delivered: the leases stay held (and heartbeated) until it is.
      if (this.#aborted && attempt >= 3) {
        this.log.error(`${batch.length} outcome(s) not delivered (${err.message}); Flint reruns those jobs when their leases expire`);
        for (const [job] of batch) this.#done(job, null, "not delivered");
        return;
      }
      this.log.warn(`finish failed (${err.message}); again in ${delay.toFixed(1)}s`);
      attempt++;
      await sleep(delay * 1000);
    }
  }

  /** Mends a batch Flint refused (422: nothing was applied) by the outcome its error names. */
  #amend(batch, err) {
    const m = /^outcomes\[(\d+)\](?:\.(.*))?$/.exec(err.field || "");
    const failed = (o, error) => ({ job_id: o.job_id, lease_token: o.lease_token, status: "failed", retryable: false, error: cut(error) });
    if (!m || Number(m[1]) >= batch.length) {
      this.log.error(`finish refused: ${err.message}`);
      if (batch.every(([, o]) => o.status === "failed" && "retryable" in o)) {
        for (const [job] of batch) this.#done(job, null, "refused: " + err.detail);
        return [];
      }
      return batch.map(([job, o]) => [job, failed(o, "Flint refused the outcome: " + err.detail)]);
    }
    const i = Number(m[1]);
    const sub = m[2] ?? "";
    const [job, o] = batch[i];
    const rest = [...batch.slice(0, i), ...batch.slice(i + 1)];
    if (sub === "job_id" || (o.status === "failed" && o.retryable === false)) {
      this.#done(job, null, "refused: " + err.detail);
      return rest;
    }
    this.log.error(`job ${job.id}: Flint refused its outcome (${err.message}); failing it for good`);
    return [...batch.slice(0, i), [job, failed(o, `Flint refused the handler's outcome: ${err.detail} (${err.field})`)], ...batch.slice(i + 1)];
  }

  /** Flint answered job's outcome: status applied, or null (lost). */
  #done(job, status, error) {
    this.#release(job);
    if (status === null) this.stats.lost++;
    else this.stats[status] = (this.stats[status] ?? 0) + 1;
    this._changed.notify();
    if (status === null) this.log.warn(`job ${job.id} (${job.type}): outcome not applied (${error || "lease lost"}); Flint reruns or has rerun it`);
  }

  // --- heartbeats ---

  #beatSoon() {
    this._beatAsked = true;
    this._beatNow.notify();
  }

  async #heartbeatLoop() {
    let last = performance.now();
    let attempt = 0;
    while (!this.#aborted) {
      const interval = this.heartbeatSeconds * 1000;
      // Progress and log lines go out early, but not more than once a second.
      if (!this._beatAsked) await this._beatNow.wait(Math.max(0, interval - (performance.now() - last)));
      if (this.#aborted) break;
      if (this._beatAsked) {
        this._beatAsked = false;
        const since = performance.now() - last;
        const min = Math.min(1000, interval);
        if (since < min) await sleep(min - since, this._aborting.signal);
        if (this.#aborted) break;
      }
      last = performance.now();
      // A lease no heartbeat renewed for a whole lease is gone: stop its handler.
      for (const job of this._held.values()) {
        if (last - job._renewed > this.leaseSeconds * 1000) {
          this.#lose(job, `no heartbeat reached Flint for ${Math.round((last - job._renewed) / 1000)} s, so its lease expired`);
        }
      }
      try {
        await this.#beat();
        attempt = 0;
      } catch (e) {
        if (e instanceof FlintError && e.status === 404) {
          if (!this.#stopped) this.#abortClaims(); // a claimer registers again
          await sleep(interval, this._aborting.signal);
          continue;
        }
        this.log.warn(`heartbeat failed: ${e.message}`);
        await sleep(Math.min(backoff(attempt++) * 1000, interval), this._aborting.signal);
      }
    }
  }

  async #beat() {
    const held = [...this._held.values()];
    const sent = held.map((job) => job._lease());
    const at = performance.now();
    let got;
    try {
      got = (await this.#request("POST", `/api/v1/workers/${this.id}/heartbeat`, { leases: sent.map(([e]) => e) }, {
        timeoutMs: Math.max(5000, this.heartbeatSeconds * 2000),
      })).data;
    } catch (e) {
      held.forEach((job, i) => {
        if (sent[i][1] && !job._progress) job._progress = sent[i][1]; // not delivered: send again
      });
      throw e;
    }
    const lost = new Set(got.lost || []);
    for (const job of held) {
      if (lost.has(job.id)) this.#stopLost(job);
      else job._renewed = at;
    }
    const state = got.state || "running";
    if (state === "terminate" && !this.#stopped) {
      this.log.info("an operator asked this worker to terminate");
      this.stop();
    }
    const quiet = state === "quiet";
    if (quiet !== this._quiet) {
      this.log.info(`an operator asked this worker to ${quiet ? "quiet down (no new jobs)" : "run again"}`);
      this._quiet = quiet;
      this._changed.notify();
      if (quiet) this.#abortClaims();
    }
    // Lines logged by jobs still running, after the leases are safe.
    for (const job of held) {
      if (job._lines.length && !job._outcomeSent && !job.stopped) await this.#sendLines(job, false);
    }
  }

  /**
   * A heartbeat said the job is lost (lease expired, past its timeout, or
   * cancellation asked): stop the handler and end the attempt as failed.
   * Flint cancels it if a cancel was asked, retries it if it timed out,
   * and changes nothing if the lease is gone.
   */
  #stopLost(job) {
    job._stop("lease lost or cancellation asked");
    if (job._outcomeSent) return;
    this.log.warn(`job ${job.id} (${job.type}) stopped: lease lost or cancellation asked; its result is dropped`);
    this.#finish(job, {
      job_id: job.id, lease_token: job.lease_token, status: "failed",
      error: "stopped: the worker lost the lease (timeout or expiry) or the job's cancellation was asked",
    });
  }
}
