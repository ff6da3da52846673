#!/usr/bin/env python3
# flint:long the reference worker is one file by design (standard library only, copied next to the user's code), so it cannot be split
"""Flint pull worker: run job handlers written in Python.

One file, standard library only (Python 3.8+). Copy it next to your code.

    from flint_worker import Worker

    worker = Worker("http://localhost:8080", api_key="flint_...")

    @worker.handler("send_invoice")
    def send_invoice(job):
        job.progress(50, "rendering")
        job.log("sending", to=job.payload["email"])
        return {"sent": True}          # the job's result

    worker.run()                       # until SIGTERM or Ctrl-C

A handler gets a Job and returns its result (anything JSON can hold). Raising
fails the attempt: Flint retries it with backoff while retries are left, then
moves it to the dead-letter queue. Raise Retry("...", after=30) to choose the
delay, Fail("...") to fail for good (straight to the DLQ), Cancel("...") to
cancel the job.

The worker claims jobs in batches (one long poll of up to 100 jobs), runs them
on `concurrency` threads, heartbeats every lease it holds from a thread of its
own, and sends the outcomes of many jobs in one request. On SIGTERM (or
SIGINT, or when an operator asks it to terminate) it stops claiming, finishes
what it holds, and deregisters; a second signal stops it at once, handing the
unfinished jobs back to Flint without charging an attempt. A job whose lease
is lost, or whose cancellation was asked, is reported stopped and its result
dropped (check job.stopped in long handlers). A worker that dies loses
nothing: Flint takes its jobs back when their leases expire.

Command line (handlers registered with the module-level @handler):

    FLINT_URL=http://localhost:8080 FLINT_API_KEY=flint_... \\
        python3 flint_worker.py myjobs            # imports myjobs.py and runs

The protocol is Flint's pull API (POST /api/v1/workers and friends); see the
section "Workers in Python" of Flint's README.
"""

import argparse
import datetime
import http.client
import importlib
import json
import logging
import os
import platform
import queue
import random
import signal
import socket
import sys
import threading
import time
import traceback
import urllib.parse

__all__ = [
    "Worker", "Job", "Retry", "Fail", "Cancel", "JobStopped", "FlintError", "ParentTooLarge",
    "Suspend", "StepOrderChanged", "Signal", "SELF", "MAX_WAIT_SECONDS", "handler", "main",
]
__version__ = "1.0.0"

log = logging.getLogger("flint_worker")

MAX_CLAIM = 100          # the API's limit on one claim
MAX_OUTCOMES = 1000      # the API's limit on one finish
MAX_LOG_LINES = 1000     # the API's limit on one log request
MAX_ERROR_CHARS = 8000   # error texts sent to Flint are cut to this
MAX_SPAWN = 10000        # the API's limit on jobs one attempt spawns
SELF = "$self"           # names the finishing job in a spawned job's depends_on
SHORT_POLL = 2.0         # seconds a claim waits while the worker holds jobs
MAX_WAIT_SECONDS = 366 * 86400  # the longest sleep or wait


# --- outcomes a handler can ask for --------------------------------------------

class Retry(Exception):
    """Fail this attempt and retry after `after` seconds (None: Flint's backoff)."""

    def __init__(self, message="retry", after=None):
        super().__init__(message)
        self.after = after


class Fail(Exception):
    """Fail the job for good: no retry, straight to the dead-letter queue."""


class Cancel(Exception):
    """Cancel the job (it ends as cancelled, not failed)."""


class Suspend(BaseException):
    """Raised by job.sleep(), job.wait_for_signal() and job.wait_for_event()
    when the job must wait: let it propagate out of the handler (it is a
    BaseException so that `except Exception` does not swallow it). The
    attempt then ends without being charged, and the job runs again when
    its wait ends, with its recorded steps."""

    def __init__(self, fields):
        super().__init__("job waits: %r" % (fields,))
        self.fields = fields


class StepOrderChanged(Exception):
    """The handler reached its steps in another order (or with other names)
    than earlier attempts recorded: the job fails for good."""


class Signal:
    """What resumed a wait: body (the signal's or event's JSON), at (when
    it arrived, RFC 3339) and timed_out (True when the wait's timeout
    passed first, with no body)."""

    def __init__(self, data):
        data = data or {}
        self.timed_out = data.get("timed_out") is True
        self.body = data.get("body")
        self.at = data.get("at")

    def __repr__(self):
        return "<Signal timed_out>" if self.timed_out else "<Signal %r at %s>" % (self.body, self.at)


class JobStopped(Exception):
    """Raised by Job.check() once the job's lease is lost or its
    cancellation was asked; the worker drops whatever the handler does next."""


class ParentTooLarge(Exception):
    """Raised by Job.parent() for a parent whose result was too large to pass
    with the claim; read it with GET /api/v1/jobs/{id} instead."""

    def __init__(self, key, size):
        super().__init__("the result of parent %r is %d bytes, more than a claim carries; "
                         "read it with GET /api/v1/jobs/{id}" % (key, size))
        self.key = key
        self.bytes = size


class FlintError(Exception):
    """An error answer from Flint's API (status 4xx or 5xx)."""

    def __init__(self, status, code="", message="", field="", retry_after=None):
        super().__init__("%s %s%s%s" % (status, code or "error", ": " + message if message else "",
                                        " (field %s)" % field if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after = retry_after

    @property
    def retryable(self):
        """Whether asking again later may succeed (5xx, 429, 408)."""
        return self.status >= 500 or self.status in (408, 429)


class _NetworkError(Exception):
    """Flint could not be reached, or the connection broke."""


# --- HTTP ----------------------------------------------------------------------

class _Conn:
    """One keep-alive connection to Flint, used by one thread at a time."""

    def __init__(self, base_url, api_key, user_agent):
        u = urllib.parse.urlsplit(base_url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("Flint URL must be http(s)://host[:port], not %r" % base_url)
        self.scheme, self.host, self.port = u.scheme, u.hostname, u.port
        self.prefix = u.path
        self.api_key = api_key
        self.user_agent = user_agent
        self._conn = None
        self._lock = threading.Lock()
        self._aborted = False

    def _connect(self, timeout):
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, timeout=30.0):
        """Sends body as JSON; returns the decoded JSON answer of a 2xx, or
        raises FlintError (an error answer) or _NetworkError."""
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"X-API-Key": self.api_key, "Accept": "application/json", "User-Agent": self.user_agent}
        if data is not None:
            headers["Content-Type"] = "application/json"
        with self._lock:
            conn = self._conn
            if self._aborted:
                self._aborted = False
                raise _NetworkError("%s %s: aborted" % (method, path))
        for fresh in (False, True):
            if conn is None or fresh:
                self.close()
                conn = self._connect(timeout)
                with self._lock:
                    self._conn = conn
            try:
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                conn.request(method, self.prefix + path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                status = resp.status
                retry_after = resp.getheader("Retry-After")
                if resp.will_close:
                    self.close()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest) as e:
                # A kept-alive connection the server closed: try once on a
                # new one (unless abort() broke it on purpose).
                self.close()
                with self._lock:
                    aborted, self._aborted = self._aborted, False
                if fresh or aborted:
                    raise _NetworkError("%s %s: %s" % (method, path, e)) from e
            except (OSError, http.client.HTTPException) as e:
                self.close()
                with self._lock:
                    self._aborted = False
                raise _NetworkError("%s %s: %s" % (method, path, e)) from e
        if 200 <= status < 300:
            if not raw:
                return {}
            try:
                return json.loads(raw)
            except ValueError as e:
                raise _NetworkError("%s %s: answer is not JSON: %r" % (method, path, raw[:200])) from e
        code = message = field = ""
        try:
            err = json.loads(raw).get("error") or {}
            code, message, field = err.get("code", ""), err.get("message", ""), err.get("field", "")
        except (ValueError, AttributeError):
            message = raw[:500].decode("utf-8", "replace")
        ra = None
        if retry_after:
            try:
                ra = float(retry_after)
            except ValueError:
                ra = None
        raise FlintError(status, code, message, field, ra)

    def abort(self):
        """Breaks a request in flight from another thread (a long poll)."""
        with self._lock:
            conn = self._conn
            self._aborted = True
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass


def backoff(attempt, base=0.5, cap=30.0):
    """Seconds to wait before try number attempt+1 (attempt counts from 0):
    exponential with full jitter, capped."""
    return random.uniform(base / 2, min(cap, base * (2 ** min(attempt, 16))))


# --- jobs ----------------------------------------------------------------------

class Job:
    """A claimed job, as the handler sees it.

    id, type, queue, payload, attempt (1 for the first run), max_retries,
    timeout_seconds, concurrency_key and lease_token come from the claim.
    parents maps each direct dependency of a workflow job (by step key, or
    job id outside its workflow) to its result; a batch callback's parents
    hold the batch under "batch" and each member's result by member id.
    """

    def __init__(self, worker, data):
        self._worker = worker
        self.id = data["id"]
        self.type = data["type"]
        self.queue = data.get("queue", "default")
        self.payload = data.get("payload")
        self.attempt = data.get("attempt", 1)
        self.max_retries = data.get("max_retries", 0)
        self.timeout_seconds = data.get("timeout_seconds") or 0
        self.lease_token = data["lease_token"]
        self.lease_expires_at = data.get("lease_expires_at")
        self.concurrency_key = data.get("concurrency_key")
        self.parents = data.get("parents") or {}
        # traceparent: this attempt's W3C trace context (only when Flint's
        # tracing is on). Send it as the traceparent header of the requests
        # the handler makes, or make it the parent of your OpenTelemetry
        # spans; the worker reports it back with the outcome, and Flint
        # records the attempt's span under it.
        self.traceparent = data.get("traceparent")
        # steps: what earlier attempts recorded (name -> result, in their
        # order); signals: what resumed the job's waits, by name.
        self.steps = dict(data.get("steps") or {})
        self.signals = data.get("signals") or {}
        self._recorded = list(self.steps)  # names in the order recorded
        self._reached = []                 # names this attempt reached
        self._replayed = []                # steps it returned as recorded
        self._spawned = []          # jobs to add to the workflow with the completion
        self.started = time.monotonic()
        self._renewed = self.started  # when Flint last extended the lease
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._progress = None       # (percent or None, message or None), not yet sent
        self._lines = []            # log lines not yet sent
        self._outcome_sent = False  # an outcome is queued or acknowledged

    def __repr__(self):
        return "<Job %s %s attempt %s>" % (self.type, self.id, self.attempt)

    @property
    def deadline(self):
        """time.monotonic() value at which the job times out, or None."""
        return self.started + self.timeout_seconds if self.timeout_seconds else None

    @property
    def stopped(self):
        """True once the worker no longer holds the job: its lease was lost,
        its cancellation was asked, or the worker is stopping at once.
        Whatever the handler returns after that is dropped."""
        return self._stopped.is_set()

    def parent(self, key):
        """The result of the parent named key (its step key, or its job id).
        Raises KeyError for a key that names no parent and ParentTooLarge
        for a result too large to pass with the claim."""
        if key not in self.parents:
            raise KeyError("no parent %r (parents: %s)" % (key, ", ".join(sorted(self.parents)[:10]) or "none"))
        r = self.parents[key]
        if isinstance(r, dict) and r.get("too_large") is True and isinstance(r.get("bytes"), int) and len(r) == 2:
            raise ParentTooLarge(key, r["bytes"])
        return r

    @property
    def batch(self):
        """For a batch callback, the batch: {"id", "total", "counts"}; else None."""
        b = self.parents.get("batch")
        return b if isinstance(b, dict) and "counts" in b else None

    def spawn(self, key, job_type, payload=None, depends_on=None, **options):
        """Adds a job to this job's workflow, created only if this attempt
        completes (a retry that spawns again creates it once). key names it
        within the workflow; depends_on lists keys of jobs spawned with it,
        keys already in the workflow, or SELF (this job). options: queue,
        priority, max_retries, timeout_seconds, concurrency_key,
        delay_seconds."""
        unknown = set(options) - {"queue", "priority", "max_retries", "timeout_seconds", "concurrency_key", "delay_seconds"}
        if unknown:
            raise TypeError("spawn() got unknown options: %s" % ", ".join(sorted(unknown)))
        if not key or not isinstance(key, str) or key.startswith("$"):
            raise ValueError("a spawned job needs a key that does not start with $")
        with self._lock:
            if any(s["key"] == key for s in self._spawned):
                raise ValueError("key %r is spawned twice" % key)
            if len(self._spawned) >= MAX_SPAWN:
                raise ValueError("at most %d jobs can be spawned in one attempt" % MAX_SPAWN)
            job = {"key": key, "type": job_type}
            if payload is not None:
                job["payload"] = payload
            if depends_on:
                job["depends_on"] = list(depends_on)
            job.update({k: v for k, v in options.items() if v is not None})
            self._spawned.append(job)

    def step(self, name, fn):
        """Runs fn() once for the job, whatever happens to its attempts: its
        result (anything JSON can hold) is recorded in Flint, under this
        attempt's lease, before step() returns it; when the job runs again
        (a retry, a lost worker, a resume after a sleep or a wait) step()
        returns the recorded result without calling fn. Steps must be
        reached in the same order on every run (StepOrderChanged fails the
        job for good otherwise); names are unique within the job."""
        recorded = self._reach(name)
        if recorded:
            self._replayed.append(name)
            return self.steps[name]
        started = _utcnow()
        result = fn()
        try:
            json.dumps(result)
        except (TypeError, ValueError) as e:
            raise Fail("step %r: its result is not JSON: %s" % (name, e))
        return self._record(name, result, started)

    def sleep(self, name, seconds):
        """Sleeps durably: the first time the job reaches the sleep called
        name, it is recorded (as a step) and Suspend is raised; the job then
        waits in Flint, holding no worker, and runs again after seconds.
        On that run (and every later one) sleep() returns at once."""
        if not 0 < seconds <= MAX_WAIT_SECONDS:
            raise Fail("sleep %r: %r seconds is out of range (more than 0, at most %d)" % (name, seconds, MAX_WAIT_SECONDS))
        if self._reach(name):
            wake = _parse_time(self.steps[name].get("wake_at") if isinstance(self.steps[name], dict) else None)
            if wake is None or wake <= _utcnow():
                return
        else:
            wake = _utcnow() + datetime.timedelta(seconds=seconds)
            self._record(name, {"wake_at": _rfc3339(wake)})
        raise Suspend({"status": "sleeping", "wake_at": _rfc3339(wake)})

    def wait_for_signal(self, name, timeout=None):
        """Returns the Signal sent to the job under name (POST
        /api/v1/jobs/{id}/signals/{name}). When none has arrived yet it
        raises Suspend: the job waits, holding no worker, until the signal
        comes (a signal sent earlier is kept for it) or timeout seconds
        pass (None: the longest wait), and then runs again, when this
        returns the signal, or one with timed_out True."""
        return self._wait("signal", name, timeout)

    def wait_for_event(self, name, timeout=None):
        """wait_for_signal() for a named event (POST /api/v1/events), which
        reaches every job waiting for it when it is sent (and is not kept)."""
        return self._wait("event", name, timeout)

    def _wait(self, kind, name, timeout):
        if name in self.signals:
            return Signal(self.signals[name])
        fields = {"status": "waiting", kind: name}
        if timeout is not None:
            if not 0 < timeout <= MAX_WAIT_SECONDS:
                raise Fail("wait for %s %r: a timeout of %r seconds is out of range" % (kind, name, timeout))
            fields["timeout_seconds"] = max(1, int(timeout))
        raise Suspend(fields)

    def _reach(self, name):
        """Moves to the next step, name; True when it was recorded before."""
        if not isinstance(name, str) or not name:
            raise Fail("a step needs a name")
        if name in self._reached:
            raise Fail("step %r is used twice in one run; step names must be unique within a job" % name)
        self._reached.append(name)
        n = len(self._reached)
        if n <= len(self._recorded):
            if self._recorded[n - 1] != name:
                raise StepOrderChanged("step order changed: step number %d is %r in the recorded history but the code "
                                       "asked for %r" % (n, self._recorded[n - 1], name))
            return True
        if name in self.steps:
            raise StepOrderChanged("step order changed: step %r (number %d) was recorded earlier as a later step" % (name, n))
        return False

    def _record(self, name, result, started=None):
        body = {"lease_token": self.lease_token, "name": name, "result": result}
        if started is not None:
            body["started_at"] = _rfc3339(started)  # the step's span and page start there
        try:
            rec = self._worker._call("POST", "/api/v1/jobs/%s/steps" % self.id, body,
                                     retry_until=lambda: not self.stopped)
        except FlintError as e:
            if e.code == "lease_lost":
                self._stopped.set()
                raise JobStopped("job %s: its lease was lost; step %r was not recorded" % (self.id, name))
            raise
        self.steps[name] = rec.get("result")
        self._recorded.append(name)
        return self.steps[name]

    def check(self):
        """Raises JobStopped if the job was stopped (see stopped)."""
        if self._stopped.is_set():
            raise JobStopped("job %s was stopped" % self.id)

    def progress(self, percent=None, message=None):
        """Reports progress (0-100 and/or a short message); it reaches
        Flint with the next heartbeat, at most a second or so later."""
        if percent is not None:
            percent = int(percent)
            if not 0 <= percent <= 100:
                raise ValueError("progress must be between 0 and 100, not %d" % percent)
        with self._lock:
            self._progress = (percent, None if message is None else str(message))
        self._worker._beat_soon()

    def log(self, message, level="info", **attrs):
        """Adds a line to the job's log (shown on its page, kept with this
        attempt); attrs are extra key/value pairs. Lines are sent in
        batches, at the latest before the job's outcome."""
        if level not in ("debug", "info", "warn", "error"):
            raise ValueError("level must be debug, info, warn or error, not %r" % (level,))
        at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
        line = {"level": level, "message": str(message) or "(empty)", "at": at.replace("+00:00", "Z")}
        if attrs:
            line["attrs"] = {k: v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for k, v in attrs.items()}
        with self._lock:
            self._lines.append(line)
        log.log({"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
                 "error": logging.ERROR}[level], "job %s: %s", self.id, message)

    def debug(self, message, **attrs):
        self.log(message, "debug", **attrs)

    def info(self, message, **attrs):
        self.log(message, "info", **attrs)

    def warn(self, message, **attrs):
        self.log(message, "warn", **attrs)

    def error(self, message, **attrs):
        self.log(message, "error", **attrs)

    # --- worker side ---

    def _lease(self):
        """The heartbeat entry for the job, with progress not yet sent."""
        entry = {"job_id": self.id, "lease_token": self.lease_token}
        with self._lock:
            p, self._progress = self._progress, None
        if p is not None:
            if p[0] is not None:
                entry["progress"] = p[0]
            if p[1] is not None:
                entry["progress_message"] = p[1]
        return entry, p

    def _unsent_progress(self, p):
        """Puts back progress a failed heartbeat did not deliver."""
        with self._lock:
            if self._progress is None:
                self._progress = p

    def _take_lines(self):
        with self._lock:
            lines, self._lines = self._lines[:MAX_LOG_LINES], self._lines[MAX_LOG_LINES:]
        return lines


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


def _rfc3339(t):
    return t.astimezone(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_time(text):
    """An RFC 3339 time as Flint writes it, or None."""
    if not isinstance(text, str):
        return None
    try:
        t = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        # Python before 3.11 takes at most 6 digits of fraction.
        head, dot, frac = text.replace("Z", "+00:00").partition(".")
        if not dot:
            return None
        digits = frac[:len(frac) - len(frac.lstrip("0123456789"))]
        try:
            t = datetime.datetime.fromisoformat(head + "." + digits[:6].ljust(6, "0") + frac[len(digits):])
        except ValueError:
            return None
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def outcome_of(job, result=None, exc=None):
    """The finish outcome for a job whose handler returned result or raised exc."""
    o = {"job_id": job.id, "lease_token": job.lease_token}
    if isinstance(exc, Suspend):
        return dict(o, **exc.fields)
    if isinstance(exc, StepOrderChanged):
        return dict(o, status="failed", retryable=False, error=_cut(str(exc)))
    if exc is None:
        try:
            json.dumps(result)
        except (TypeError, ValueError) as e:
            return dict(o, status="failed", retryable=False,
                        error=_cut("the handler's result is not JSON: %s" % e))
        o["status"] = "completed"
        if result is not None:
            o["result"] = result
        if job._spawned:
            o["spawn"] = list(job._spawned)
        return o
    if isinstance(exc, Cancel):
        return dict(o, status="cancelled", error=_cut(str(exc) or "cancelled by the handler"))
    o["status"] = "failed"
    if isinstance(exc, Fail):
        o["retryable"] = False
        o["error"] = _cut(str(exc) or "failed")
    elif isinstance(exc, Retry):
        o["error"] = _cut(str(exc) or "retry")
        if exc.after is not None:
            o["retry_after_seconds"] = max(0.0, float(exc.after))
    else:
        o["error"] = _cut("%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__)
    return o


def _cut(text, limit=MAX_ERROR_CHARS):
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _traced(job, outcome):
    """outcome with the attempt's traceparent, when the claim gave one."""
    if job.traceparent and "traceparent" not in outcome:
        outcome = dict(outcome, traceparent=job.traceparent)
        if job._replayed:  # events on the attempt's span
            outcome["replayed_steps"] = list(job._replayed)
    return outcome


def _outcome_index(field):
    """The outcome index and sub-field a 422 names: "outcomes[3].result" →
    (3, "result"); None when it names no single outcome."""
    if not field.startswith("outcomes["):
        return None
    end = field.find("]")
    try:
        i = int(field[len("outcomes["):end])
    except ValueError:
        return None
    return i, field[end + 2:] if len(field) > end + 1 else ""


# --- the worker ----------------------------------------------------------------

_default_handlers = {}
_default_schemas = {}


def _check_schema(job_type, schema):
    if schema is not None and not isinstance(schema, dict):
        raise ValueError("the schema of %r must be a JSON Schema object (a dict)" % job_type)
    if schema is not None:
        json.dumps(schema)  # raises on what JSON cannot hold


def handler(job_type, schema=None):
    """Registers fn as the handler of job_type for the command line
    (python3 flint_worker.py module) and for Worker(handlers=None).
    schema, a JSON Schema (dict) of the payload, is declared when the worker
    registers: every Flint API process then refuses a payload that does
    not fit it with a 422 naming the field."""
    _check_schema(job_type, schema)

    def register(fn):
        if job_type in _default_handlers:
            raise ValueError("a handler for %r is registered already" % job_type)
        _default_handlers[job_type] = fn
        if schema is not None:
            _default_schemas[job_type] = schema
        return fn
    return register


class Worker:
    """A pull worker: register handlers, then run().

    url, api_key: Flint's address and a key with the `work` scope (default:
        FLINT_URL, FLINT_API_KEY).
    queues: the queues to take work from (default: every queue the key may work).
    concurrency: handler threads, the most jobs that run at once.
    prefetch: jobs claimed beyond those running, so that fast jobs never wait
        for a claim (claims ask for up to 100 jobs).
    claimers: claims in flight at once (1-8); more than one helps only
        when many short jobs are prefetched.
    wait_seconds: how long one claim waits for work (long poll, 0-30).
    shutdown_timeout: how long a graceful stop waits for running jobs; the
        rest go back to Flint without an attempt charged.
    """

    def __init__(self, url=None, api_key=None, *, name=None, queues=None, concurrency=10, prefetch=0,
                 claimers=1, wait_seconds=20.0, shutdown_timeout=30.0, handlers=None, schemas=None, version=None):
        url = url or os.environ.get("FLINT_URL") or "http://localhost:8080"
        api_key = api_key or os.environ.get("FLINT_API_KEY")
        if not api_key:
            raise ValueError("an API key with the work scope is required (api_key= or FLINT_API_KEY)")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if prefetch < 0:
            raise ValueError("prefetch must be 0 or more")
        if not 1 <= claimers <= 8:
            raise ValueError("claimers must be between 1 and 8")
        if not 0 <= wait_seconds <= 30:
            raise ValueError("wait_seconds must be between 0 and 30")
        self.url, self.api_key = url, api_key
        self.name = name or "%s:%d" % (socket.gethostname(), os.getpid())
        self.queues = list(queues) if queues else []
        self.concurrency, self.prefetch, self.claimers = concurrency, prefetch, claimers
        self.wait_seconds, self.shutdown_timeout = float(wait_seconds), float(shutdown_timeout)
        self.handlers = dict(_default_handlers if handlers is None else handlers)
        self.schemas = dict(_default_schemas if handlers is None else {})
        for job_type, schema in (schemas or {}).items():
            _check_schema(job_type, schema)
            self.schemas[job_type] = schema
        self.version = version
        self.id = None
        self.heartbeat_seconds, self.lease_seconds = 5.0, 30.0
        self._ua = "flint-worker-python/%s (Python %s)" % (__version__, platform.python_version())
        self._local = threading.local()
        self._claim_conns = set()  # the claimers' connections
        self._short_polls = set()  # of those, the ones in a short poll (jobs are held)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # held/queued changed
        self._held = {}          # job id → Job: claimed and not yet finished
        self._waiting = 0        # claimed jobs no handler thread has picked up
        self._asking = 0         # jobs asked for by claims in flight
        self._register_lock = threading.Lock()
        self._work = queue.Queue()
        self._outcomes = queue.Queue()
        self._stop = threading.Event()      # stop claiming (graceful)
        self._abort = threading.Event()     # stop now
        self._quiet = False                 # an operator asked for quiet
        self._beat_now = threading.Event()
        self._threads = []
        self.stats = {"claimed": 0, "completed": 0, "failed": 0, "cancelled": 0, "lost": 0}

    # --- registration of handlers ---

    def handler(self, job_type, schema=None):
        """Decorator: @worker.handler("send_invoice") registers the function
        as the handler of that job type; schema= declares its payload's JSON
        Schema (see the module-level handler)."""
        _check_schema(job_type, schema)

        def register(fn):
            if job_type in self.handlers:
                raise ValueError("a handler for %r is registered already" % job_type)
            self.handlers[job_type] = fn
            if schema is not None:
                self.schemas[job_type] = schema
            return fn
        return register

    # --- lifecycle ---

    def stop(self, now=False):
        """Asks the worker to stop: claim nothing more and finish what it
        holds (now=False), or hand what it holds back at once (now=True).
        Safe from signal handlers and other threads."""
        self._stop.set()
        if now:
            self._abort.set()
        self._beat_now.set()
        # A long poll in flight ends now; the worker's deregistration hands
        # back anything Flint claims for it meanwhile. A short poll (while
        # jobs are held) is let finish, and what it brings is run with the
        # rest, so that no job waits for its lease to expire.
        self._abort_claims(short_too=now)

    def _abort_claims(self, short_too=True):
        for conn in list(self._claim_conns):
            if short_too or conn not in self._short_polls:
                conn.abort()

    def run(self, install_signals=True):
        """Registers, works until stopped (SIGTERM, SIGINT, an operator's
        terminate, or stop()), and deregisters. Returns the stats."""
        if not self.handlers:
            raise ValueError("no handlers registered: use @worker.handler(\"type\")")
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if install_signals and threading.current_thread() is threading.main_thread():
            self._install_signals()
        if not self._register():
            return self.stats
        self._start(self._heartbeat_loop, "flint-heartbeat")
        self._start(self._finish_loop, "flint-finish")
        for i in range(self.concurrency):
            self._start(self._run_jobs, "flint-handler-%d" % i)
        claimers = [self._start(self._claim_loop, "flint-claim-%d" % i) for i in range(self.claimers)]
        try:
            while not self._stop.wait(0.5):
                pass
        except KeyboardInterrupt:
            self.stop()
        for t in claimers:
            t.join()
        log.info("stopping: no more claims; %d job(s) held", len(self._held))
        self._drain()
        return self.stats

    def _install_signals(self):
        def on_signal(signum, _frame):
            if self._stop.is_set():
                log.warning("second %s: stopping now", signal.Signals(signum).name)
                self.stop(now=True)
            else:
                log.info("%s: finishing the jobs held, then stopping (again to stop now)", signal.Signals(signum).name)
                self.stop()
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def _start(self, target, name):
        def guarded():
            try:
                target()
            except Exception:  # noqa: BLE001 — a bug here must stop the worker, not hang it
                log.exception("%s failed; stopping the worker", name)
                self.stop(now=True)
        t = threading.Thread(target=guarded, name=name, daemon=True)
        t.start()
        self._threads.append(t)
        return t

    def _drain(self):
        """Waits for the jobs held to finish (up to shutdown_timeout), then
        deregisters: whatever is still held goes back to Flint."""
        deadline = time.monotonic() + self.shutdown_timeout
        with self._lock:
            while self._held and not self._abort.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("shutdown timeout: %d job(s) still running go back to Flint", len(self._held))
                    break
                self._changed.wait(min(left, 0.5))
            left_behind = list(self._held.values())
        for job in left_behind:
            job._stopped.set()
        self._abort.set()
        self._beat_now.set()
        for _ in range(self.concurrency):
            self._work.put(None)
        self._outcomes.put(None)
        for t in self._threads:
            if t.name in ("flint-finish", "flint-heartbeat"):
                t.join(timeout=10)
        self._deregister()

    # --- API calls ---

    def _conn(self):
        """This thread's connection."""
        c = getattr(self._local, "conn", None)
        if c is None:
            c = self._local.conn = _Conn(self.url, self.api_key, self._ua)
        return c

    def _call(self, method, path, body=None, timeout=30.0, retry_until=None):
        """One API call; network errors and 5xx/429 answers are retried with
        backoff while retry_until() is true (None: not retried)."""
        attempt = 0
        while True:
            try:
                return self._conn().request(method, path, body, timeout)
            except (_NetworkError, FlintError) as e:
                if isinstance(e, FlintError) and not e.retryable:
                    raise
                if retry_until is None or not retry_until():
                    raise
                delay = backoff(attempt)
                if isinstance(e, FlintError) and e.retry_after:
                    delay = max(delay, min(e.retry_after, 60.0))
                log.warning("%s %s failed (%s); again in %.1fs", method, path, e, delay)
                attempt += 1
                self._abort.wait(delay)

    def _register(self):
        version = "%s (flint_worker %s)" % (platform.python_version(), __version__)
        if self.version:  # the application's own version first
            version = "%s (Python %s, flint_worker %s)" % (self.version, platform.python_version(), __version__)
        body = {"name": self.name, "types": sorted(self.handlers), "concurrency": self.concurrency,
                "language": "python", "version": version}
        schemas = {t: s for t, s in self.schemas.items() if t in self.handlers}
        if schemas:
            body["schemas"] = schemas
        if self.queues:
            body["queues"] = self.queues
        try:
            got = self._call("POST", "/api/v1/workers", body, retry_until=lambda: not self._stop.is_set())
        except (_NetworkError, FlintError):
            if self._stop.is_set():
                return False
            raise
        self.id = got["id"]
        self.heartbeat_seconds = float(got.get("heartbeat_seconds") or 5)
        self.lease_seconds = float(got.get("lease_seconds") or 30)
        log.info("registered as %s: types %s, queues %s", self.id, ", ".join(body["types"]),
                 ", ".join(got.get("queues") or []) or "all")
        return True

    def _deregister(self):
        if self.id is None:
            return
        try:
            got = self._call("DELETE", "/api/v1/workers/" + self.id, timeout=10,
                             retry_until=lambda: False)
            log.info("deregistered %s (%d job(s) handed back)", self.id, got.get("released", 0))
        except FlintError as e:
            if e.status != 404:
                log.warning("deregistering %s failed: %s; its leases expire on their own", self.id, e)
        except _NetworkError as e:
            log.warning("deregistering %s failed: %s; its leases expire on their own", self.id, e)

    # --- claiming ---

    def _room(self):
        """How many jobs the worker may claim now (under _lock), or 0 when
        a claim should wait: jobs still queued locally keep threads busy,
        so it claims once half the capacity is free."""
        capacity = self.concurrency + self.prefetch
        room = capacity - len(self._held) - self._asking
        if room <= 0:
            return 0
        if (self._waiting or self._asking) and room < max(1, capacity // 2):
            return 0
        return min(room, MAX_CLAIM)

    def _claim_loop(self):
        conn = self._conn()
        self._claim_conns.add(conn)
        try:
            self._claim(conn)
        finally:
            self._claim_conns.discard(conn)

    def _claim(self, conn):
        attempt = 0
        while not self._stop.is_set():
            with self._lock:
                while not self._stop.is_set() and (self._quiet or self._room() == 0):
                    self._changed.wait(0.5)
                if self._stop.is_set():
                    break
                n = self._room()
                busy = len(self._held) > 0
                self._asking += n
            # With jobs running, shorter polls keep claims sized to the room.
            wait = min(self.wait_seconds, SHORT_POLL) if busy else self.wait_seconds
            if wait <= SHORT_POLL:
                self._short_polls.add(conn)
            else:
                self._short_polls.discard(conn)
            worker_id = self.id
            try:
                got = conn.request("POST", "/api/v1/workers/%s/claim" % worker_id,
                                   {"max": n, "wait_seconds": wait}, timeout=wait + 30)
                attempt = 0
            except FlintError as e:
                if self._stop.is_set():
                    break
                if e.status == 404:
                    self._lost_registration(worker_id)
                    continue
                if not e.retryable:
                    log.error("claim refused: %s", e)
                delay = max(backoff(attempt), e.retry_after or 0)
                attempt += 1
                self._stop.wait(delay)
                continue
            except _NetworkError as e:
                if self._stop.is_set():
                    break
                delay = backoff(attempt)
                log.warning("claim failed (%s); again in %.1fs", e, delay)
                attempt += 1
                self._stop.wait(delay)
                continue
            finally:
                with self._lock:
                    self._asking -= n
                    self._changed.notify_all()
            jobs = [Job(self, d) for d in got.get("jobs") or []]
            if not jobs:
                continue
            # Flint gave back a job this worker still runs: its earlier
            # lease was lost (expired or reaped) and that run must stop.
            with self._lock:
                stale = [self._held[j.id] for j in jobs if j.id in self._held]
            for old in stale:
                self._lose(old, "its lease was lost and Flint handed the job out again")
            with self._lock:
                for j in jobs:
                    self._held[j.id] = j
                self._waiting += len(jobs)
                self.stats["claimed"] += len(jobs)
            for j in jobs:
                self._work.put(j)

    def _lost_registration(self, worker_id):
        """Flint no longer knows this worker (an operator deregistered it):
        its jobs went back to their queues. Drop them and register again."""
        with self._register_lock:
            if self.id != worker_id:
                return  # another claimer registered again already
            with self._lock:
                dropped = list(self._held.values())
            for job in dropped:
                self._lose(job, "the worker's registration was removed")
            log.warning("Flint no longer knows worker %s; registering again", self.id)
            self._register()

    # --- running handlers ---

    def _run_jobs(self):
        while True:
            job = self._work.get()
            if job is None:
                return
            with self._lock:
                self._waiting -= 1
            if job.stopped:
                continue  # lost before it started
            fn = self.handlers.get(job.type)
            result, exc = None, None
            try:
                if fn is None:
                    raise Fail("this worker has no handler for job type %r" % job.type)
                result = fn(job)
            except JobStopped:
                continue
            except BaseException as e:  # noqa: BLE001 — every failure (SystemExit too) is the job's outcome
                exc = e
                if not isinstance(e, (Retry, Fail, Cancel, Suspend)):
                    job.log("".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip(), "error")
            if job.stopped:
                continue
            self._send_lines(job)
            self._finish(job, outcome_of(job, result, exc))

    def _send_lines(self, job, retry=True):
        """Sends the job's buffered log lines (a lost lease drops them);
        with retry, a failed request is tried again for up to 30 s."""
        deadline = time.monotonic() + 30
        while True:
            lines = job._take_lines()
            if not lines:
                return
            try:
                self._call("POST", "/api/v1/jobs/%s/logs" % job.id, {"lease_token": job.lease_token, "lines": lines},
                           retry_until=(lambda: not self._abort.is_set() and not job.stopped
                                        and time.monotonic() < deadline) if retry else None)
            except FlintError as e:
                if e.code != "lease_lost":
                    log.warning("job %s: %d log line(s) refused: %s", job.id, len(lines), e)
                return
            except _NetworkError as e:
                log.warning("job %s: %d log line(s) not sent: %s", job.id, len(lines), e)
                return

    def _finish(self, job, outcome):
        with job._lock:
            if job._outcome_sent:
                return
            job._outcome_sent = True
        self._outcomes.put((job, outcome))

    def _release(self, job):
        """Forgets job (under _lock), unless a newer claim of the same id
        replaced it; returns whether it was held."""
        if self._held.get(job.id) is not job:
            return False
        del self._held[job.id]
        return True

    def _lose(self, job, why):
        """The worker no longer holds job: stop it, drop its result."""
        job._stopped.set()
        with job._lock:
            sent, job._outcome_sent = job._outcome_sent, True
        with self._lock:
            if self._release(job) and not sent:
                self.stats["lost"] += 1
            self._changed.notify_all()
        if not sent:
            log.warning("job %s (%s, attempt %s) stopped: %s; its result is dropped", job.id, job.type, job.attempt, why)

    # --- finishing ---

    def _finish_loop(self):
        """Sends outcomes in batches: whatever piled up while the last
        request was in flight goes in the next one."""
        done = False
        while not done:
            item = self._outcomes.get()
            if item is None:
                break
            batch = [item]
            while len(batch) < MAX_OUTCOMES:
                try:
                    item = self._outcomes.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    done = True
                    break
                batch.append(item)
            self._send_outcomes(batch)

    def _send_outcomes(self, batch):
        attempt = 0
        while batch:
            body = {"outcomes": [_traced(job, o) for job, o in batch]}
            try:
                got = self._conn().request("POST", "/api/v1/workers/%s/finish" % self.id, body, timeout=60)
            except FlintError as e:
                if e.status == 422:
                    batch = self._amend(batch, e)
                    continue
                if e.status == 404:
                    for job, _ in batch:
                        self._done(job, None, "the worker's registration was removed")
                    return
                err, delay = e, max(backoff(attempt), e.retry_after or 0)
            except _NetworkError as e:
                err, delay = e, backoff(attempt)
            else:
                results = got.get("outcomes") or []
                for (job, o), r in zip(batch, results):
                    self._done(job, o["status"] if r.get("ok") else None, r.get("error") or "")
                return
            # Not delivered: the leases stay held (and heartbeated) until it is.
            if self._abort.is_set() and attempt >= 3:
                log.error("%d outcome(s) not delivered (%s); Flint reruns those jobs when their leases expire",
                          len(batch), err)
                return
            log.warning("finish failed (%s); again in %.1fs", err, delay)
            attempt += 1
            time.sleep(delay)

    def _amend(self, batch, err):
        """Mends a batch Flint refused (422: nothing was applied) by the
        outcome its error names; returns the batch to send again."""
        at = _outcome_index(err.field)
        if at is None or at[0] >= len(batch):
            # Not one outcome's fault: fail every one, retryable, saying why.
            log.error("finish refused: %s", err)
            if all(o.get("status") == "failed" and "retryable" in o for _, o in batch):
                for job, _ in batch:
                    self._done(job, None, "refused: " + err.message)
                return []
            return [(job, {"job_id": o["job_id"], "lease_token": o["lease_token"], "status": "failed", "retryable": False,
                           "error": _cut("Flint refused the outcome: " + err.message)}) for job, o in batch]
        i, sub = at
        job, o = batch[i]
        if sub == "job_id":
            # Claimed under an earlier registration: not this worker's any more.
            self._done(job, None, err.message)
            return batch[:i] + batch[i + 1:]
        if o.get("status") == "failed" and o.get("retryable") is False:
            self._done(job, None, "refused: " + err.message)  # cannot be mended further
            return batch[:i] + batch[i + 1:]
        log.error("job %s: Flint refused its outcome (%s); failing it for good", job.id, err)
        fixed = {"job_id": o["job_id"], "lease_token": o["lease_token"], "status": "failed", "retryable": False,
                 "error": _cut("Flint refused the handler's outcome: %s (%s)" % (err.message, err.field))}
        return batch[:i] + [(job, fixed)] + batch[i + 1:]

    def _done(self, job, status, error):
        """Flint answered job's outcome: status applied, or None (lost)."""
        with self._lock:
            self._release(job)
            if status is None:
                self.stats["lost"] += 1
            else:
                self.stats[status] = self.stats.get(status, 0) + 1
            self._changed.notify_all()
        if status is None:
            log.warning("job %s (%s): outcome not applied (%s); Flint reruns or has rerun it",
                        job.id, job.type, error or "lease lost")

    # --- heartbeats ---

    def _beat_soon(self):
        self._beat_now.set()

    def _heartbeat_loop(self):
        last = time.monotonic()
        attempt = 0
        while not self._abort.is_set():
            interval = self.heartbeat_seconds
            # Progress and log lines go out early, but not more than once a second.
            self._beat_now.wait(max(0.0, interval - (time.monotonic() - last)))
            if self._abort.is_set():
                break
            if self._beat_now.is_set():
                self._beat_now.clear()
                since = time.monotonic() - last
                if since < min(1.0, interval):
                    self._abort.wait(min(1.0, interval) - since)
            last = time.monotonic()
            # A lease no heartbeat renewed for a whole lease is gone (Flint
            # reruns the job): stop its handler.
            for job in self._expired(last):
                self._lose(job, "no heartbeat reached Flint for %.0f s, so its lease expired" % (last - job._renewed))
            try:
                self._beat()
                attempt = 0
            except FlintError as e:
                if e.status == 404:
                    if not self._stop.is_set():
                        self._abort_claims()  # a claimer registers again
                    self._abort.wait(interval)
                    continue
                log.warning("heartbeat failed: %s", e)
                self._abort.wait(min(backoff(attempt), interval))
                attempt += 1
            except _NetworkError as e:
                log.warning("heartbeat failed: %s", e)
                self._abort.wait(min(backoff(attempt), interval))
                attempt += 1

    def _expired(self, now):
        """The jobs held whose lease no heartbeat renewed within a lease."""
        with self._lock:
            return [j for j in self._held.values() if now - j._renewed > self.lease_seconds]

    def _beat(self):
        with self._lock:
            held = list(self._held.values())
        entries, sent = [], []
        for job in held:
            e, p = job._lease()
            entries.append(e)
            sent.append((job, p))
        at = time.monotonic()
        try:
            got = self._conn().request("POST", "/api/v1/workers/%s/heartbeat" % self.id, {"leases": entries},
                                       timeout=max(5.0, self.heartbeat_seconds * 2))
        except Exception:
            for job, p in sent:
                if p is not None:
                    job._unsent_progress(p)
            raise
        lost = set(got.get("lost") or [])
        for job in held:
            if job.id in lost:
                self._stop_lost(job)
            else:
                job._renewed = at
        state = got.get("state", "running")
        if state == "terminate" and not self._stop.is_set():
            log.info("an operator asked this worker to terminate")
            self.stop()
        quiet = state == "quiet"
        if quiet != self._quiet:
            log.info("an operator asked this worker to %s", "quiet down (no new jobs)" if quiet else "run again")
            with self._lock:
                self._quiet = quiet
                self._changed.notify_all()
            if quiet:
                self._abort_claims()
        # Lines logged by jobs still running, after the leases are safe.
        for job in held:
            if job._lines and not job._outcome_sent and not job.stopped:
                self._send_lines(job, retry=False)

    def _stop_lost(self, job):
        """A heartbeat said the job is lost (its lease expired, it ran past
        its timeout, or its cancellation was asked): stop the handler and
        end the attempt as failed. Flint cancels it if a cancel was asked,
        retries it if it timed out, and changes nothing if the lease is gone."""
        job._stopped.set()
        with job._lock:
            queued = job._outcome_sent
        if queued:
            return
        log.warning("job %s (%s) stopped: lease lost or cancellation asked; its result is dropped", job.id, job.type)
        self._finish(job, {"job_id": job.id, "lease_token": job.lease_token, "status": "failed",
                           "error": "stopped: the worker lost the lease (timeout or expiry) or the job's cancellation was asked"})


# --- command line --------------------------------------------------------------

def main(argv=None):
    """python3 flint_worker.py [options] module [module...]: imports the
    modules (which register handlers with @flint_worker.handler) and runs a
    worker until SIGTERM or Ctrl-C."""
    # Modules imported below say `import flint_worker`: let them find this
    # one, not a second copy, when it runs as a script.
    this = sys.modules[__name__]
    sys.modules.setdefault("flint_worker", this)
    p = argparse.ArgumentParser(prog="flint_worker", description="Run Python job handlers for Flint.")
    p.add_argument("modules", nargs="+", help="modules to import (they register handlers with @flint_worker.handler)")
    p.add_argument("--url", default=os.environ.get("FLINT_URL", "http://localhost:8080"), help="Flint's address (FLINT_URL)")
    p.add_argument("--queues", default=os.environ.get("FLINT_QUEUES", ""), help="comma-separated queues (default: all the key may work)")
    p.add_argument("--concurrency", type=int, default=int(os.environ.get("FLINT_CONCURRENCY", "10")), help="handler threads (default 10)")
    p.add_argument("--prefetch", type=int, default=int(os.environ.get("FLINT_PREFETCH", "0")), help="jobs claimed beyond those running")
    p.add_argument("--claimers", type=int, default=1, help="claims in flight at once (1-8; default 1)")
    p.add_argument("--wait", type=float, default=20.0, help="seconds one claim waits for work (0-30)")
    p.add_argument("--shutdown-timeout", type=float, default=30.0, help="seconds a graceful stop waits for running jobs")
    p.add_argument("--name", default=None, help="the worker's name in Flint (default host:pid)")
    p.add_argument("--log-level", default=os.environ.get("FLINT_LOG_LEVEL", "info"), help="debug, info, warning or error")
    args = p.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for m in args.modules:
        importlib.import_module(m[:-3] if m.endswith(".py") else m)
    try:
        w = Worker(args.url, handlers=dict(this._default_handlers), schemas=dict(this._default_schemas), name=args.name,
                   queues=[q for q in args.queues.split(",") if q], concurrency=args.concurrency,
                   prefetch=args.prefetch, claimers=args.claimers, wait_seconds=args.wait, shutdown_timeout=args.shutdown_timeout)
        stats = w.run()
    except (ValueError, FlintError, _NetworkError) as e:
        print("flint_worker: %s" % e, file=sys.stderr)
        return 2
    log.info("stopped: %s", ", ".join("%s %d" % kv for kv in sorted(stats.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
