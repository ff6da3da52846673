// The client side: enqueue jobs (one, a batch, a workflow, a batch with
// callbacks) and inspect them. Wire data keeps the API's own names
// (snake_case); see index.d.ts for the shapes.

import { baseURL, request } from "./http.js";

export const VERSION = "1.0.0";

/** Talks to Flint's JSON API with a key (the `enqueue` scope is enough to enqueue). */
export class Client {
  /**
   * @param {{url?: string, apiKey?: string, timeoutMs?: number}} [options]
   *   url and apiKey default to FLINT_URL and FLINT_API_KEY.
   */
  constructor({ url, apiKey, timeoutMs = 30000 } = {}) {
    this.url = baseURL(url || process.env.FLINT_URL || "http://localhost:8080");
    this.apiKey = apiKey || process.env.FLINT_API_KEY;
    if (!this.apiKey) throw new TypeError("an API key is required (apiKey or FLINT_API_KEY)");
    this.timeoutMs = timeoutMs;
    this.userAgent = `flint-client-node/${VERSION} (Node ${process.versions.node})`;
  }

  async #call(method, path, body, options = {}) {
    const got = await request(this.url, this.apiKey, this.userAgent, method, path, body, {
      signal: options.signal,
      timeoutMs: options.timeoutMs ?? this.timeoutMs,
    });
    return got;
  }

  /** Enqueues one job. A repeated idempotency_key resolves to the job it made first (created false). */
  async enqueue(job, options) {
    const { status, data } = await this.#call("POST", "/api/v1/jobs", job, options);
    return Object.defineProperty(data, "created", { value: status === 201, enumerable: false });
  }

  /** Enqueues many jobs in one transaction: all or none. */
  async enqueueBatch(jobs, options) {
    return (await this.#call("POST", "/api/v1/jobs/batch", { jobs }, options)).data.jobs;
  }

  /** Enqueues a workflow: jobs with keys, depends_on naming keys; each job comes back with its key. */
  async enqueueWorkflow(jobs, options) {
    return (await this.#call("POST", "/api/v1/workflows", { jobs }, options)).data.jobs;
  }

  /** Creates a batch: members plus on_success / on_complete / on_death callbacks. */
  async createBatch(batch, options) {
    return (await this.#call("POST", "/api/v1/batches", batch, options)).data;
  }

  /** The batch's state and counts. */
  async getBatch(id, options) {
    return (await this.#call("GET", `/api/v1/batches/${encodeURIComponent(id)}`, undefined, options)).data;
  }

  /** One job with its executions and dependencies. */
  async getJob(id, options) {
    return (await this.#call("GET", `/api/v1/jobs/${encodeURIComponent(id)}`, undefined, options)).data;
  }

  /** A page of jobs: filters status, type, queue, q; limit and cursor (the last page's next_cursor). */
  async listJobs(filters = {}, options) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v !== undefined && v !== null) qs.set(k, String(v));
    const s = qs.toString();
    return (await this.#call("GET", "/api/v1/jobs" + (s ? "?" + s : ""), undefined, options)).data;
  }

  /** Cancels a job: at once when it waits, at its next checkpoint when it runs. */
  async cancelJob(id, options) {
    return (await this.#call("POST", `/api/v1/jobs/${encodeURIComponent(id)}/cancel`, undefined, options)).data;
  }

  /** Retries a failed job, or replays it from the dead-letter queue. */
  async retryJob(id, options) {
    return (await this.#call("POST", `/api/v1/jobs/${encodeURIComponent(id)}/retry`, undefined, options)).data;
  }
}
