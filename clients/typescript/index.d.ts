// Type declarations for Flint's Node.js client and pull worker (index.js).
// Wire data keeps the API's own names (snake_case); options are camelCase.

/** Any JSON value. */
export type JSONValue = string | number | boolean | null | JSONValue[] | { [key: string]: JSONValue };
export type JSONObject = { [key: string]: JSONValue };

export type Priority = 1 | 2 | 3 | "high" | "medium" | "low";
export type JobStatus =
  | "queued" | "scheduled" | "blocked" | "claimed" | "running" | "waiting"
  | "completed" | "failed" | "dead_letter" | "cancelled";
/**
 * The order of listJobs: by creation (the default, newest first; "oldest"
 * earliest first), start or finish time (latest first, or the _oldest forms).
 */
export type JobSort = "created" | "oldest" | "started" | "started_oldest" | "finished" | "finished_oldest";

/** A job to enqueue (POST /api/v1/jobs). Only `type` is required. */
export interface NewJob {
  type: string;
  payload?: JSONObject;
  priority?: Priority;
  queue?: string;
  run_at?: string;
  delay_seconds?: number;
  max_retries?: number;
  timeout_seconds?: number;
  interval_seconds?: number;
  cron?: string;
  depends_on?: string[];
  /** A repeated key returns the job it made first, not a duplicate. */
  idempotency_key?: string;
  concurrency_key?: string;
}

/** A job of a workflow: `key` names it, `depends_on` names other keys of the workflow. */
export interface WorkflowJob extends NewJob {
  key: string;
}

/** A job as the API returns it (the fields most callers read; the API sends more). */
export interface JobInfo {
  id: string;
  type: string;
  queue: string;
  status: JobStatus;
  payload: JSONObject;
  priority: number;
  attempt: number;
  max_retries: number;
  run_at: string;
  created_at: string;
  idempotency_key?: string | null;
  key?: string;
  result?: JSONValue;
  last_error?: string | null;
  progress?: number | null;
  progress_message?: string | null;
  [field: string]: unknown;
}

/** What enqueue resolves to: the job, and whether this call created it (false for a repeated idempotency key). */
export type EnqueuedJob = JobInfo & { readonly created: boolean };

export interface NewBatch {
  jobs: NewJob[];
  on_success?: NewJob;
  on_complete?: NewJob;
  on_death?: NewJob;
  open?: boolean;
}

export interface RequestOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

export interface ClientOptions {
  /** Flint's address; default FLINT_URL, then http://localhost:8080. */
  url?: string;
  /** An API key; default FLINT_API_KEY. */
  apiKey?: string;
  /** Per-request timeout in milliseconds (default 30000). */
  timeoutMs?: number;
}

export declare const VERSION: string;

/** Enqueues and inspects jobs over Flint's JSON API. No request is retried by the client. */
export declare class Client {
  constructor(options?: ClientOptions);
  readonly url: string;
  enqueue(job: NewJob, options?: RequestOptions): Promise<EnqueuedJob>;
  enqueueBatch(jobs: NewJob[], options?: RequestOptions): Promise<JobInfo[]>;
  enqueueWorkflow(jobs: WorkflowJob[], options?: RequestOptions): Promise<JobInfo[]>;
  createBatch(batch: NewBatch, options?: RequestOptions): Promise<{ id: string; jobs: JobInfo[] }>;
  getBatch(id: string, options?: RequestOptions): Promise<JSONObject>;
  getJob(id: string, options?: RequestOptions): Promise<JobInfo>;
  listJobs(
    filters?: { status?: JobStatus; type?: string; queue?: string; q?: string; limit?: number; cursor?: string; sort?: JobSort },
    options?: RequestOptions,
  ): Promise<{ jobs: JobInfo[]; next_cursor?: string | null }>;
  cancelJob(id: string, options?: RequestOptions): Promise<JobInfo>;
  retryJob(id: string, options?: RequestOptions): Promise<JobInfo>;
}

/** An error answer from Flint: `status`, and the API's `code`, `detail` (its message) and `field`. */
export declare class FlintError extends Error {
  readonly status: number;
  readonly code: string;
  /** The API's message, without the status and code. */
  readonly detail: string;
  /** The field the API names as the cause ("priority", "jobs[1].type"), or "". */
  readonly field: string;
  /** Seconds from a Retry-After header, if any. */
  readonly retryAfter: number | undefined;
  /** Whether asking again later may succeed (5xx, 408, 429). */
  readonly retryable: boolean;
}
/** 400 or 422: the request was refused; `field` names the culprit. */
export declare class ValidationError extends FlintError {}
/** 401 or 403: the key is missing, wrong, or lacks the scope or queue. */
export declare class AuthError extends FlintError {}
/** 404: no such job, worker or batch. */
export declare class NotFoundError extends FlintError {}
/** 409: the job's state does not allow that. */
export declare class ConflictError extends FlintError {}
/** Flint could not be reached, the connection broke, or the request timed out. */
export declare class NetworkError extends Error {}

/** Throw to fail this attempt and retry after `after` seconds (default: Flint's backoff). */
export declare class Retry extends Error {
  constructor(message?: string, options?: { after?: number });
  readonly after: number | undefined;
}
/** Throw to fail the job for good: no retry, straight to the dead-letter queue. */
export declare class Fail extends Error {
  constructor(message?: string);
}
/** Throw to cancel the job (it ends cancelled, not failed). */
export declare class Cancel extends Error {
  constructor(message?: string);
}
/** Thrown by job.check() once the worker no longer holds the job. */
export declare class JobStopped extends Error {}
/** Thrown by job.parent() for a parent whose result was too large to pass with the claim. */
export declare class ParentTooLarge extends Error {
  readonly key: string;
  readonly bytes: number;
}

/** Names the finishing job in a spawned job's depends_on. */
export declare const SELF: "$self";
/** The longest durable sleep or wait, in seconds (366 days). */
export declare const MAX_WAIT_SECONDS: number;

/**
 * Thrown by job.sleep(), job.waitForSignal() and job.waitForEvent() when the
 * job must wait; let it propagate out of the handler (a catch-all must
 * rethrow it). The attempt ends uncharged and the job runs again when its
 * wait ends, with its recorded steps.
 */
export declare class Suspend extends Error {
  readonly fields: Record<string, JSONValue>;
}
/** The handler reached its steps in another order or with other names than earlier attempts recorded; the job fails for good. */
export declare class StepOrderChanged extends Error {}
/** What resumed a wait. */
export declare class Signal<B = JSONValue> {
  /** True when the wait's timeout passed first (body is then null). */
  readonly timedOut: boolean;
  /** The signal's or event's JSON body. */
  readonly body: B | null;
  /** When it arrived (RFC 3339), or null on a timeout. */
  readonly at: string | null;
}

export interface SpawnOptions {
  depends_on?: string[];
  queue?: string;
  priority?: Priority;
  max_retries?: number;
  timeout_seconds?: number;
  concurrency_key?: string;
  delay_seconds?: number;
}

export type LogLevel = "debug" | "info" | "warn" | "error";
export type LogAttrs = Record<string, string | number | boolean | null | object>;

/** A claimed job, as its handler sees it. */
export declare class Job<P = any> {
  readonly id: string;
  readonly type: string;
  readonly queue: string;
  readonly payload: P;
  /** 1 for the first run. */
  readonly attempt: number;
  readonly max_retries: number;
  readonly timeout_seconds: number;
  readonly lease_token: string;
  readonly lease_expires_at: string | null;
  readonly concurrency_key: string | null;
  /** Results of the job's direct dependencies, by step key (or job id); a batch callback's hold "batch". */
  readonly parents: Record<string, JSONValue>;
  /** Durable steps recorded by earlier attempts, by name. */
  readonly steps: Record<string, JSONValue>;
  /** What resumed the job's waits, by signal or event name. */
  readonly signals: Record<string, { body?: JSONValue; at?: string; timed_out?: boolean }>;
  /** This attempt's W3C trace context when Flint's tracing is on, else null; reported back with the outcome. */
  readonly traceparent: string | null;
  /** Aborted once the job is stopped (lease lost, cancellation asked, worker stopping now). */
  readonly signal: AbortSignal;
  /** True once the worker no longer holds the job; whatever the handler returns is then dropped. */
  readonly stopped: boolean;
  /** For a batch callback, the batch; otherwise null. */
  readonly batch: { id: string; total: number; counts: Record<string, number> } | null;
  /** Throws JobStopped if the job was stopped. */
  check(): void;
  /** The result of the named parent; throws RangeError for no such parent, ParentTooLarge for one too large to pass. */
  parent<T = JSONValue>(key: string): T;
  /** Adds a job to this job's workflow, created only if this attempt completes. */
  spawn(key: string, type: string, payload?: JSONObject | null, options?: SpawnOptions): void;
  /**
   * Runs fn once for the job whatever happens to its attempts: the result is
   * recorded in Flint before step() resolves to it, and later runs get the
   * recorded result without calling fn. Steps are reached in the same order
   * on every run (StepOrderChanged otherwise); names are unique in a job.
   */
  step<T>(name: string, fn: () => T | Promise<T>): Promise<T>;
  /** Sleeps durably: the first run records the sleep and throws Suspend; the job runs again after seconds, when sleep() resolves at once. */
  sleep(name: string, seconds: number): Promise<void>;
  /** The signal sent under name; until it arrives (or timeoutSeconds pass) the job waits, holding no worker (Suspend). */
  waitForSignal<B = JSONValue>(name: string, timeoutSeconds?: number): Promise<Signal<B>>;
  /** waitForSignal() for a named event (POST /api/v1/events). */
  waitForEvent<B = JSONValue>(name: string, timeoutSeconds?: number): Promise<Signal<B>>;
  /** Reports progress (0-100 and/or a message); it goes out with the next heartbeat. */
  progress(percent?: number | null, message?: string | null): void;
  /** Adds a line to the job's log, kept with this attempt. */
  log(message: string, attrs?: LogAttrs, level?: LogLevel): void;
  debug(message: string, attrs?: LogAttrs): void;
  info(message: string, attrs?: LogAttrs): void;
  warn(message: string, attrs?: LogAttrs): void;
  error(message: string, attrs?: LogAttrs): void;
}

/** A handler: its return value (anything JSON can hold) is the job's result; throwing fails the attempt. */
export type Handler<P = any> = (job: Job<P>) => unknown | Promise<unknown>;

export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** A logger writing timestamped lines at or above level to stderr. */
export declare function consoleLogger(level?: "debug" | "info" | "warning" | "warn" | "error"): Logger;

/** A JSON Schema (draft 2020-12 unless it says otherwise with $schema). */
export type JSONSchema = { [keyword: string]: unknown };

export interface WorkerOptions {
  /** Flint's address; default FLINT_URL, then http://localhost:8080. */
  url?: string;
  /** A key with the work scope; default FLINT_API_KEY. */
  apiKey?: string;
  /** The worker's name in Flint (default host:pid). */
  name?: string;
  /** Queues to work (default: every queue the key may work). */
  queues?: string[];
  /** Handlers running at once (default 10). */
  concurrency?: number;
  /** Jobs claimed beyond those running (default 0). */
  prefetch?: number;
  /** Claims in flight at once, 1-8 (default 1). */
  claimers?: number;
  /** How long one claim waits for work, 0-30 seconds (default 20). */
  waitSeconds?: number;
  /** How long a graceful stop waits for running jobs, in seconds (default 30). */
  shutdownTimeout?: number;
  /** Handlers by job type (or register them with handle()). */
  handlers?: Record<string, Handler>;
  /**
   * Payload JSON Schemas by job type (or give them to handle()), declared
   * at registration: every Flint API process refuses a payload that does
   * not fit with a 422 naming the field.
   */
  schemas?: Record<string, JSONSchema>;
  /** The application's version, shown with the worker and with each schema it declares. */
  version?: string;
  /** Where the worker logs (default: stderr at FLINT_LOG_LEVEL, else info). */
  logger?: Logger;
}

export interface WorkerStats {
  claimed: number;
  completed: number;
  failed: number;
  cancelled: number;
  lost: number;
}

/** A pull worker: register handlers, then run(). */
export declare class Worker {
  constructor(options?: WorkerOptions);
  readonly name: string;
  /** The id Flint gave at registration (null before). */
  readonly id: string | null;
  readonly stats: WorkerStats;
  readonly log: Logger;
  /** Registers the handler of a job type, with its payload's JSON Schema if given; returns the worker. */
  handle<P = any>(type: string, handler: Handler<P>, options?: { schema?: JSONSchema }): this;
  /** Registers, works until stopped, deregisters. SIGTERM/SIGINT stop it gracefully (a second one at once). */
  run(options?: { installSignals?: boolean }): Promise<WorkerStats>;
  /** Stop claiming and finish the jobs held (or, with now, hand them back at once). */
  stop(options?: { now?: boolean }): void;
}
