// What a handler sees (Job) and the outcomes it can ask for (Retry, Fail,
// Cancel). The worker (worker.js) turns a handler's return or throw into
// a finish outcome with outcomeOf.

export const SELF = "$self"; // names the finishing job in a spawned job's depends_on
export const MAX_LOG_LINES = 1000; // the API's limit on one log request
export const MAX_ERROR_CHARS = 8000; // error texts sent to Flint are cut to this
export const MAX_SPAWN = 10000; // the API's limit on jobs one attempt spawns
export const MAX_WAIT_SECONDS = 366 * 86400; // the longest sleep or wait
const SPAWN_OPTIONS = new Set(["queue", "priority", "max_retries", "timeout_seconds", "concurrency_key", "delay_seconds"]);
const LEVELS = new Set(["debug", "info", "warn", "error"]);

/** Fail this attempt and retry after `after` seconds (undefined: Flint's backoff). */
export class Retry extends Error {
  constructor(message = "retry", { after } = {}) {
    super(message);
    this.name = "Retry";
    this.after = after;
  }
}

/** Fail the job for good: no retry, straight to the dead-letter queue. */
export class Fail extends Error {
  constructor(message = "failed") {
    super(message);
    this.name = "Fail";
  }
}

/** Cancel the job (it ends as cancelled, not failed). */
export class Cancel extends Error {
  constructor(message = "cancelled by the handler") {
    super(message);
    this.name = "Cancel";
  }
}

/** Thrown by job.check() once the worker no longer holds the job. */
export class JobStopped extends Error {
  constructor(message) {
    super(message);
    this.name = "JobStopped";
  }
}

/** Thrown by job.parent() for a parent whose result was too large to pass with the claim. */
export class ParentTooLarge extends Error {
  constructor(key, bytes) {
    super(`the result of parent ${JSON.stringify(key)} is ${bytes} bytes, more than a claim carries; read it with GET /api/v1/jobs/{id}`);
    this.name = "ParentTooLarge";
    this.key = key;
    this.bytes = bytes;
  }
}

/**
 * Thrown by job.sleep(), job.waitForSignal() and job.waitForEvent() when the
 * job must wait: let it propagate out of the handler (a catch-all must
 * rethrow it). The attempt then ends without being charged, and the job runs
 * again when its wait ends, with its recorded steps.
 */
export class Suspend extends Error {
  constructor(fields) {
    super(`job waits: ${JSON.stringify(fields)}`);
    this.name = "Suspend";
    this.fields = fields;
  }
}

/** The handler reached its steps in another order (or with other names) than earlier attempts recorded: the job fails for good. */
export class StepOrderChanged extends Error {
  constructor(message) {
    super(message);
    this.name = "StepOrderChanged";
  }
}

/** What resumed a wait: body (the signal's or event's JSON), at (RFC 3339) and timedOut (the timeout passed first). */
export class Signal {
  constructor(data) {
    data = data ?? {};
    this.timedOut = data.timed_out === true;
    this.body = data.body ?? null;
    this.at = data.at ?? null;
  }
}

// An array index as a JavaScript object orders it: before every other key,
// in numeric order, whatever order the JSON had.
const INDEX_KEY = /^(0|[1-9][0-9]{0,8})$/;

/** A claimed job, as its handler sees it. Claim fields keep the API's names. */
export class Job {
  #controller = null; // made when the handler first asks for job.signal
  #stopped = null; // why the job was stopped, once it is
  #hooks;

  constructor(data, hooks) {
    this.#hooks = hooks;
    this.id = data.id;
    this.type = data.type;
    this.queue = data.queue ?? "default";
    this.payload = data.payload ?? null;
    this.attempt = data.attempt ?? 1;
    this.max_retries = data.max_retries ?? 0;
    this.timeout_seconds = data.timeout_seconds || 0;
    this.lease_token = data.lease_token;
    this.lease_expires_at = data.lease_expires_at ?? null;
    this.concurrency_key = data.concurrency_key ?? null;
    this.parents = data.parents ?? {};
    // This attempt's W3C trace context (only when Flint's tracing is on):
    // send it as the traceparent header of the handler's requests, or make
    // it the parent of your OpenTelemetry spans. The worker reports it back
    // with the outcome, and Flint records the attempt's span under it.
    this.traceparent = data.traceparent ?? null;
    // steps: what earlier attempts recorded (name -> result, in their
    // order); signals: what resumed the job's waits, by name.
    this.steps = { ...(data.steps ?? {}) };
    this.signals = data.signals ?? {};
    this._recorded = Object.keys(this.steps); // names in the order recorded
    // Names that look like array indexes lose the JSON's order in an
    // object; with one of them, only what the order cannot hide is checked.
    this._ordered = !this._recorded.some((k) => INDEX_KEY.test(k));
    this._reached = []; // names this attempt reached
    this._replayed = []; // steps it returned as recorded (events on the attempt's span)
    this.started = performance.now();
    this._renewed = this.started; // when Flint last extended the lease
    this._spawned = []; // jobs to add to the workflow with the completion
    this._progress = null; // [percent|null, message|null] not yet sent
    this._lines = []; // log lines not yet sent
    this._outcomeSent = false; // an outcome is queued or acknowledged
  }

  /** Aborted once the job is stopped; pass it to fetch and friends. */
  get signal() {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#stopped) this.#controller.abort(this.#stopped);
    }
    return this.#controller.signal;
  }

  /**
   * True once the worker no longer holds the job: its lease was lost, its
   * cancellation was asked, or the worker is stopping at once. Whatever the
   * handler returns after that is dropped.
   */
  get stopped() {
    return this.#stopped !== null;
  }

  /** Throws JobStopped if the job was stopped. */
  check() {
    if (this.stopped) throw new JobStopped(`job ${this.id} was stopped`);
  }

  _stop(why) {
    if (this.#stopped) return;
    this.#stopped = new JobStopped(`job ${this.id} was stopped: ${why}`);
    this.#controller?.abort(this.#stopped);
  }

  /** The result of the parent named key (its step key, or its job id). */
  parent(key) {
    if (!Object.hasOwn(this.parents, key)) {
      const names = Object.keys(this.parents).sort().slice(0, 10).join(", ") || "none";
      throw new RangeError(`no parent ${JSON.stringify(key)} (parents: ${names})`);
    }
    const r = this.parents[key];
    if (r && typeof r === "object" && r.too_large === true && Number.isInteger(r.bytes) && Object.keys(r).length === 2) {
      throw new ParentTooLarge(key, r.bytes);
    }
    return r;
  }

  /** For a batch callback, the batch `{id, total, counts}`; else null. */
  get batch() {
    const b = this.parents.batch;
    return b && typeof b === "object" && "counts" in b ? b : null;
  }

  /**
   * Adds a job to this job's workflow, created only if this attempt
   * completes. depends_on lists keys spawned with it, keys already in the
   * workflow, or SELF.
   */
  spawn(key, type, payload, options = {}) {
    const { depends_on, ...rest } = options;
    const unknown = Object.keys(rest).filter((k) => !SPAWN_OPTIONS.has(k));
    if (unknown.length) throw new TypeError(`spawn() got unknown options: ${unknown.sort().join(", ")}`);
    if (typeof key !== "string" || !key || key.startsWith("$")) throw new TypeError("a spawned job needs a key that does not start with $");
    if (this._spawned.some((s) => s.key === key)) throw new TypeError(`key ${JSON.stringify(key)} is spawned twice`);
    if (this._spawned.length >= MAX_SPAWN) throw new RangeError(`at most ${MAX_SPAWN} jobs can be spawned in one attempt`);
    const job = { key, type };
    if (payload !== undefined && payload !== null) job.payload = payload;
    if (depends_on?.length) job.depends_on = [...depends_on];
    for (const [k, v] of Object.entries(rest)) if (v !== undefined && v !== null) job[k] = v;
    this._spawned.push(job);
  }

  /**
   * Runs fn() once for the job, whatever happens to its attempts: its result
   * (anything JSON can hold) is recorded in Flint under this attempt's lease
   * before step() resolves to it; when the job runs again (a retry, a lost
   * worker, a resume after a sleep or a wait) step() resolves to the recorded
   * result without calling fn. Steps must be reached in the same order on
   * every run (StepOrderChanged fails the job for good otherwise); names are
   * unique within the job.
   */
  async step(name, fn) {
    if (this._reach(name)) {
      this._replayed.push(name);
      return this.steps[name];
    }
    const started = new Date();
    const result = await fn();
    let text;
    try {
      text = JSON.stringify(result);
    } catch (e) {
      throw new Fail(`step ${JSON.stringify(name)}: its result is not JSON: ${e.message}`);
    }
    return this._record(name, text === undefined ? null : result, started);
  }

  /**
   * Sleeps durably: the first time the job reaches the sleep called name, it
   * is recorded (as a step) and Suspend is thrown; the job then waits in
   * Flint, holding no worker, and runs again after seconds. On that run (and
   * every later one) sleep() resolves at once.
   */
  async sleep(name, seconds) {
    if (!(seconds > 0 && seconds <= MAX_WAIT_SECONDS)) {
      throw new Fail(`sleep ${JSON.stringify(name)}: ${seconds} seconds is out of range (more than 0, at most ${MAX_WAIT_SECONDS})`);
    }
    let wake;
    if (this._reach(name)) {
      const rec = this.steps[name];
      wake = rec && typeof rec === "object" ? Date.parse(rec.wake_at) : NaN;
      if (Number.isNaN(wake) || wake <= Date.now()) return;
    } else {
      wake = Date.now() + seconds * 1000;
      await this._record(name, { wake_at: new Date(wake).toISOString() });
    }
    throw new Suspend({ status: "sleeping", wake_at: new Date(wake).toISOString() });
  }

  /**
   * Resolves to the Signal sent to the job under name (POST
   * /api/v1/jobs/{id}/signals/{name}). When none has arrived yet it throws
   * Suspend: the job waits, holding no worker, until the signal comes (one
   * sent earlier is kept for it) or timeoutSeconds pass (undefined: the
   * longest wait), and then runs again, when this resolves to the signal, or
   * to one with timedOut true.
   */
  async waitForSignal(name, timeoutSeconds) {
    return this._wait("signal", name, timeoutSeconds);
  }

  /** waitForSignal() for a named event (POST /api/v1/events), which reaches every job waiting for it when sent (it is not kept). */
  async waitForEvent(name, timeoutSeconds) {
    return this._wait("event", name, timeoutSeconds);
  }

  _wait(kind, name, timeout) {
    if (typeof name !== "string" || !name) throw new Fail(`a wait for a ${kind} needs a name`);
    if (Object.hasOwn(this.signals, name)) return new Signal(this.signals[name]);
    const fields = { status: "waiting", [kind]: name };
    if (timeout !== undefined && timeout !== null) {
      if (!(timeout > 0 && timeout <= MAX_WAIT_SECONDS)) {
        throw new Fail(`wait for ${kind} ${JSON.stringify(name)}: a timeout of ${timeout} seconds is out of range`);
      }
      fields.timeout_seconds = Math.max(1, Math.trunc(timeout));
    }
    throw new Suspend(fields);
  }

  /** Moves to the next step, name; true when it was recorded before. */
  _reach(name) {
    if (typeof name !== "string" || !name) throw new Fail("a step needs a name");
    if (this._reached.includes(name)) {
      throw new Fail(`step ${JSON.stringify(name)} is used twice in one run; step names must be unique within a job`);
    }
    this._reached.push(name);
    const n = this._reached.length;
    const known = Object.hasOwn(this.steps, name);
    if (this._ordered && n <= this._recorded.length) {
      if (this._recorded[n - 1] !== name) {
        throw new StepOrderChanged(`step order changed: step number ${n} is ${JSON.stringify(this._recorded[n - 1])} in the recorded ` +
          `history but the code asked for ${JSON.stringify(name)}`);
      }
      return true;
    }
    if (known) {
      if (this._ordered) throw new StepOrderChanged(`step order changed: step ${JSON.stringify(name)} (number ${n}) was recorded earlier as a later step`);
      return true;
    }
    const skipped = this._recorded.filter((k) => !this._reached.includes(k));
    if (skipped.length) {
      throw new StepOrderChanged(`step order changed: the code asked for ${JSON.stringify(name)}, which was never recorded, ` +
        `before the recorded ${skipped.map((k) => JSON.stringify(k)).join(", ")}`);
    }
    return false;
  }

  async _record(name, result, started) {
    const rec = await this.#hooks.recordStep(this, name, result, started);
    this.steps[name] = rec?.result ?? null;
    this._recorded.push(name);
    return this.steps[name];
  }

  /** Reports progress (0-100 and/or a short message); it reaches Flint with the next heartbeat. */
  progress(percent, message) {
    if (percent !== undefined && percent !== null) {
      percent = Math.trunc(percent);
      if (!(percent >= 0 && percent <= 100)) throw new RangeError(`progress must be between 0 and 100, not ${percent}`);
    }
    this._progress = [percent ?? null, message === undefined || message === null ? null : String(message)];
    this.#hooks.beatSoon();
  }

  /** Adds a line to the job's log (kept with this attempt); attrs are extra key/value pairs. */
  log(message, attrs, level = "info") {
    if (!LEVELS.has(level)) throw new TypeError(`level must be debug, info, warn or error, not ${JSON.stringify(level)}`);
    const line = { level, message: String(message) || "(empty)", at: new Date().toISOString() };
    if (attrs && Object.keys(attrs).length) {
      line.attrs = {};
      for (const [k, v] of Object.entries(attrs)) {
        line.attrs[k] = v === null || ["string", "number", "boolean"].includes(typeof v) ? v : safeString(v);
      }
    }
    this._lines.push(line);
    this.#hooks.logged(this, level, line.message);
  }

  debug(message, attrs) {
    this.log(message, attrs, "debug");
  }
  info(message, attrs) {
    this.log(message, attrs, "info");
  }
  warn(message, attrs) {
    this.log(message, attrs, "warn");
  }
  error(message, attrs) {
    this.log(message, attrs, "error");
  }

  /** The heartbeat entry for the job, with progress not yet sent (and that progress). */
  _lease() {
    const entry = { job_id: this.id, lease_token: this.lease_token };
    const p = this._progress;
    this._progress = null;
    if (p) {
      if (p[0] !== null) entry.progress = p[0];
      if (p[1] !== null) entry.progress_message = p[1];
    }
    return [entry, p];
  }

  _takeLines() {
    return this._lines.splice(0, MAX_LOG_LINES);
  }
}

function safeString(v) {
  try {
    return JSON.stringify(v) ?? String(v);
  } catch {
    return String(v);
  }
}

export function cut(text, limit = MAX_ERROR_CHARS) {
  return text.length <= limit ? text : text.slice(0, limit - 1) + "…";
}

/** The finish outcome for a job whose handler resolved to result or threw err (threw: true). */
export function outcomeOf(job, result, err, threw) {
  const o = { job_id: job.id, lease_token: job.lease_token };
  if (job.traceparent) {
    o.traceparent = job.traceparent; // Flint records the attempt's span under it
    if (job._replayed?.length) o.replayed_steps = [...job._replayed]; // events on that span
  }
  if (threw && err instanceof Suspend) return { ...o, ...err.fields };
  if (threw && err instanceof StepOrderChanged) return { ...o, status: "failed", retryable: false, error: cut(err.message) };
  if (!threw) {
    try {
      JSON.stringify(result);
    } catch (e) {
      return { ...o, status: "failed", retryable: false, error: cut(`the handler's result is not JSON: ${e.message}`) };
    }
    o.status = "completed";
    if (result !== undefined && result !== null) o.result = result;
    if (job._spawned.length) o.spawn = [...job._spawned];
    return o;
  }
  if (err instanceof Cancel) return { ...o, status: "cancelled", error: cut(err.message || "cancelled by the handler") };
  o.status = "failed";
  if (err instanceof Fail) {
    o.retryable = false;
    o.error = cut(err.message || "failed");
  } else if (err instanceof Retry) {
    o.error = cut(err.message || "retry");
    if (err.after !== undefined && err.after !== null) o.retry_after_seconds = Math.max(0, Number(err.after));
  } else if (err instanceof Error) {
    o.error = cut(err.message ? `${err.name}: ${err.message}` : err.name);
  } else {
    o.error = cut(`thrown: ${safeString(err)}`);
  }
  return o;
}
