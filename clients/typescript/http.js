// HTTP to Flint's JSON API over node:http with keep-alive connections,
// and the errors its answers become. Shared by the client and the worker.
// (node:http rather than the built-in fetch: a worker makes few, large
// requests, and fetch spent about twice the CPU per job doing it.)

import http from "node:http";
import https from "node:https";

const agents = {
  "http:": new http.Agent({ keepAlive: true }),
  "https:": new https.Agent({ keepAlive: true }),
};

/** An error answer from Flint's API: `{"error": {"code", "message", "field"}}`. */
export class FlintError extends Error {
  constructor(status, code = "", message = "", field = "", retryAfter = undefined) {
    super(`${status} ${code || "error"}${message ? ": " + message : ""}${field ? ` (field ${field})` : ""}`);
    this.name = "FlintError";
    this.status = status;
    this.code = code;
    this.detail = message;
    this.field = field;
    this.retryAfter = retryAfter;
  }

  /** Whether asking again later may succeed (5xx, 408, 429). */
  get retryable() {
    return this.status >= 500 || this.status === 408 || this.status === 429;
  }
}

/** 400 or 422: the request named in `field` was refused. */
export class ValidationError extends FlintError {
  constructor(...args) {
    super(...args);
    this.name = "ValidationError";
  }
}

/** 401 or 403: the key is missing, wrong, or lacks the scope or queue. */
export class AuthError extends FlintError {
  constructor(...args) {
    super(...args);
    this.name = "AuthError";
  }
}

/** 404: no such job, worker or batch. */
export class NotFoundError extends FlintError {
  constructor(...args) {
    super(...args);
    this.name = "NotFoundError";
  }
}

/** 409: the job's state does not allow that (or the lease was lost). */
export class ConflictError extends FlintError {
  constructor(...args) {
    super(...args);
    this.name = "ConflictError";
  }
}

/** Flint could not be reached, the connection broke, or the request timed out. */
export class NetworkError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "NetworkError";
  }
}

function errorFor(status, code, message, field, retryAfter) {
  const cls =
    status === 400 || status === 422 ? ValidationError
    : status === 401 || status === 403 ? AuthError
    : status === 404 ? NotFoundError
    : status === 409 ? ConflictError
    : FlintError;
  return new cls(status, code, message, field, retryAfter);
}

/** Parses a Retry-After header given in seconds (an HTTP date counts as absent). */
function retryAfterSeconds(h) {
  if (!h) return undefined;
  const n = Number(h);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** Checks a Flint base URL and returns it without a trailing slash. */
export function baseURL(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`Flint URL must be http(s)://host[:port], not ${JSON.stringify(url)}`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new TypeError(`Flint URL must be http(s)://host[:port], not ${JSON.stringify(url)}`);
  }
  return url.replace(/\/+$/, "");
}

/**
 * One JSON request: sends body as JSON and resolves to the decoded answer
 * of a 2xx (with the status under `status`), or rejects with a FlintError
 * (an error answer) or a NetworkError. `signal` aborts it; `timeoutMs`
 * bounds it.
 */
export async function request(base, apiKey, userAgent, method, path, body, { signal, timeoutMs = 30000 } = {}) {
  const headers = { "X-API-Key": apiKey, Accept: "application/json", "User-Agent": userAgent };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  if (payload) headers["Content-Length"] = String(payload.length);
  // The timeout and the caller's signal abort one controller.
  const ctl = new AbortController();
  let why = "";
  const timer = setTimeout(() => {
    why = "timed out";
    ctl.abort();
  }, timeoutMs);
  const onAbort = () => {
    why ||= "aborted";
    ctl.abort();
  };
  if (signal?.aborted) onAbort();
  signal?.addEventListener("abort", onAbort, { once: true });
  let resp;
  try {
    resp = await exchange(new URL(base + path), method, headers, payload, ctl.signal);
  } catch (e) {
    throw new NetworkError(`${method} ${path}: ${why || e?.code || e?.message || String(e)}`, { cause: e });
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
  const raw = resp.raw;
  if (resp.status >= 200 && resp.status < 300) {
    if (!raw) return { status: resp.status, data: {} };
    try {
      return { status: resp.status, data: JSON.parse(raw) };
    } catch (e) {
      throw new NetworkError(`${method} ${path}: answer is not JSON: ${raw.slice(0, 200)}`, { cause: e });
    }
  }
  let code = "", message = "", field = "";
  try {
    const err = JSON.parse(raw).error || {};
    ({ code = "", message = "", field = "" } = err);
  } catch {
    message = raw.slice(0, 500);
  }
  throw errorFor(resp.status, code, message, field, retryAfterSeconds(resp.headers["retry-after"]));
}

/**
 * One HTTP exchange: resolves to {status, headers, raw} with the whole
 * body read. A request on a kept-alive connection that the server had
 * closed meanwhile is sent once more on a new one (Node's advice for
 * keep-alive agents): the server never read it.
 */
function exchange(url, method, headers, payload, signal, retried = false) {
  return new Promise((resolve, reject) => {
    const mod = url.protocol === "https:" ? https : http;
    const req = mod.request(url, { method, headers, agent: agents[url.protocol], signal }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, raw: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", (e) => {
      if (!retried && req.reusedSocket && e.code === "ECONNRESET" && !signal.aborted) {
        exchange(url, method, headers, payload, signal, true).then(resolve, reject);
      } else {
        reject(e);
      }
    });
    req.end(payload);
  });
}

/** Seconds to wait before try number attempt+1 (from 0): exponential with full jitter, capped. */
export function backoff(attempt, base = 0.5, cap = 30) {
  const hi = Math.min(cap, base * 2 ** Math.min(attempt, 16));
  return base / 2 + Math.random() * Math.max(0, hi - base / 2);
}
