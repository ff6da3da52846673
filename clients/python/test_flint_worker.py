"""Unit tests of flint_worker's parts that need no Flint: outcomes, the
handling of refused finishes, and the HTTP layer against a stand-in server.
The worker against a real Flint is tested by internal/e2e/python_worker_test.go.

    python3 -m unittest -v test_flint_worker
"""

import http.server
import json
import logging
import threading
import time
import unittest

import flint_worker as fw

fw.log.setLevel(logging.CRITICAL)  # the tests provoke warnings on purpose


class FakeWorker:
    def __init__(self):
        self.calls = []

    def _beat_soon(self):
        pass

    def _call(self, method, path, body=None, timeout=30.0, retry_until=None):
        self.calls.append((method, path, body))
        return {"name": body["name"], "seq": len(self.calls), "result": body["result"]}


def job(**kw):
    data = {"id": "j1", "type": "t", "lease_token": "tok", "attempt": 1}
    data.update(kw)
    return fw.Job(FakeWorker(), data)


class OutcomeTest(unittest.TestCase):
    def test_completed_with_result(self):
        self.assertEqual(fw.outcome_of(job(), {"a": 1}),
                         {"job_id": "j1", "lease_token": "tok", "status": "completed", "result": {"a": 1}})

    def test_outcome_carries_the_attempts_traceparent(self):
        tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        traced = job(traceparent=tp)
        self.assertEqual(traced.traceparent, tp)
        self.assertEqual(fw._traced(traced, fw.outcome_of(traced, 1))["traceparent"], tp)
        self.assertIsNone(job().traceparent)
        self.assertNotIn("traceparent", fw._traced(job(), fw.outcome_of(job(), 1)))

    def test_completed_without_result(self):
        self.assertNotIn("result", fw.outcome_of(job(), None))

    def test_result_that_is_not_json_fails_for_good(self):
        o = fw.outcome_of(job(), {"when": object()})
        self.assertEqual(o["status"], "failed")
        self.assertIs(o["retryable"], False)
        self.assertIn("not JSON", o["error"])

    def test_exception_is_retried(self):
        o = fw.outcome_of(job(), exc=KeyError("x"))
        self.assertEqual(o["status"], "failed")
        self.assertNotIn("retryable", o)
        self.assertEqual(o["error"], "KeyError: 'x'")

    def test_retry_after(self):
        o = fw.outcome_of(job(), exc=fw.Retry("busy", after=12))
        self.assertEqual((o["status"], o["error"], o["retry_after_seconds"]), ("failed", "busy", 12.0))

    def test_fail_for_good(self):
        o = fw.outcome_of(job(), exc=fw.Fail("bad input"))
        self.assertEqual((o["status"], o["retryable"], o["error"]), ("failed", False, "bad input"))

    def test_cancel(self):
        self.assertEqual(fw.outcome_of(job(), exc=fw.Cancel())["status"], "cancelled")


class WorkflowDataTest(unittest.TestCase):
    def test_parents(self):
        j = job(parents={"fetch": {"url": "s3://a"}, "big": {"too_large": True, "bytes": 9000000}, "quiet": None})
        self.assertEqual(j.parent("fetch"), {"url": "s3://a"})
        self.assertIsNone(j.parent("quiet"))
        with self.assertRaises(fw.ParentTooLarge) as e:
            j.parent("big")
        self.assertEqual((e.exception.key, e.exception.bytes), ("big", 9000000))
        with self.assertRaises(KeyError):
            j.parent("nope")
        self.assertIsNone(j.batch)
        self.assertEqual(job().parents, {})

    def test_batch(self):
        b = {"id": "b1", "total": 3, "counts": {"completed": 3}}
        self.assertEqual(job(parents={"batch": b, "m1": 1}).batch, b)

    def test_spawn_rides_with_the_completion_only(self):
        j = job()
        j.spawn("square-1", "square", {"n": 1}, depends_on=[fw.SELF])
        j.spawn("total", "total", depends_on=["square-1"], priority="high")
        o = fw.outcome_of(j, {"ok": True})
        self.assertEqual(o["spawn"], [
            {"key": "square-1", "type": "square", "payload": {"n": 1}, "depends_on": ["$self"]},
            {"key": "total", "type": "total", "depends_on": ["square-1"], "priority": "high"}])
        self.assertNotIn("spawn", fw.outcome_of(j, exc=ValueError("no")))

    def test_spawn_refusals(self):
        j = job()
        j.spawn("a", "t")
        with self.assertRaises(ValueError):
            j.spawn("a", "t")
        with self.assertRaises(ValueError):
            j.spawn("$x", "t")
        with self.assertRaises(TypeError):
            j.spawn("b", "t", colour="red")

    def test_long_errors_are_cut(self):
        o = fw.outcome_of(job(), exc=RuntimeError("x" * 20000))
        self.assertLessEqual(len(o["error"]), fw.MAX_ERROR_CHARS)


class DurableTest(unittest.TestCase):
    def test_step_runs_once_then_returns_the_record(self):
        j = job(steps={"charge": {"id": "ch_1"}})
        ran = []
        self.assertEqual(j.step("charge", lambda: ran.append(1)), {"id": "ch_1"})
        self.assertEqual(ran, [], "a recorded step does not run")
        self.assertEqual(j.step("invoice", lambda: "INV-1"), "INV-1")
        self.assertRegex(j._worker.calls[0][2].pop("started_at"), r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", "the step's start")
        self.assertEqual(j._worker.calls, [("POST", "/api/v1/jobs/j1/steps", {"lease_token": "tok", "name": "invoice", "result": "INV-1"})])
        j.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        self.assertEqual(fw._traced(j, {})["replayed_steps"], ["charge"], "the replayed step goes with the outcome")

    def test_changed_order_fails_for_good(self):
        j = job(steps={"charge": 1, "invoice": 2})
        with self.assertRaises(fw.StepOrderChanged):
            j.step("invoice", lambda: 2)
        o = fw.outcome_of(j, exc=fw.StepOrderChanged("step order changed"))
        self.assertEqual((o["status"], o["retryable"]), ("failed", False))
        with self.assertRaises(fw.Fail):
            job().step("", lambda: 1)

    def test_sleep_records_and_suspends_once(self):
        j = job()
        with self.assertRaises(fw.Suspend) as c:
            j.sleep("cool-off", 60)
        o = fw.outcome_of(j, exc=c.exception)
        self.assertEqual(o["status"], "sleeping")
        self.assertIn("wake_at", o)
        self.assertEqual(j._worker.calls[0][2]["name"], "cool-off")
        woke = job(steps={"cool-off": {"wake_at": "2000-01-01T00:00:00.123456789Z"}})
        self.assertIsNone(woke.sleep("cool-off", 60), "slept already: returns at once")
        with self.assertRaises(fw.Fail):
            job().sleep("x", 0)

    def test_wait_for_signal(self):
        with self.assertRaises(fw.Suspend) as c:
            job().wait_for_signal("approval", timeout=3600)
        self.assertEqual(c.exception.fields, {"status": "waiting", "signal": "approval", "timeout_seconds": 3600})
        got = job(signals={"approval": {"body": {"by": "ann"}, "at": "2026-12-06T10:00:00Z"}}).wait_for_signal("approval")
        self.assertEqual((got.timed_out, got.body), (False, {"by": "ann"}))
        self.assertTrue(job(signals={"approval": {"timed_out": True}}).wait_for_signal("approval").timed_out)
        with self.assertRaises(fw.Suspend) as c:
            job().wait_for_event("order.paid:1")
        self.assertEqual(c.exception.fields, {"status": "waiting", "event": "order.paid:1"})


class JobTest(unittest.TestCase):
    def test_progress_is_sent_once(self):
        j = job()
        j.progress(30, "a third")
        entry, p = j._lease()
        self.assertEqual((entry["progress"], entry["progress_message"]), (30, "a third"))
        entry, _ = j._lease()
        self.assertNotIn("progress", entry)
        j._unsent_progress(p)  # a failed heartbeat puts it back
        self.assertEqual(j._lease()[0]["progress"], 30)

    def test_progress_range(self):
        with self.assertRaises(ValueError):
            job().progress(101)

    def test_log_lines(self):
        j = job()
        j.log("hello", n=1, obj=object())
        j.warn("careful")
        with self.assertRaises(ValueError):
            j.log("x", level="loud")
        lines = j._take_lines()
        self.assertEqual([(ln["level"], ln["message"]) for ln in lines], [("info", "hello"), ("warn", "careful")])
        self.assertEqual(lines[0]["attrs"]["n"], 1)
        self.assertIsInstance(lines[0]["attrs"]["obj"], str)
        self.assertTrue(lines[0]["at"].endswith("Z"))
        self.assertEqual(j._take_lines(), [])

    def test_check(self):
        j = job()
        j.check()
        j._stopped.set()
        self.assertTrue(j.stopped)
        with self.assertRaises(fw.JobStopped):
            j.check()


class RegistrationTest(unittest.TestCase):
    def test_decorator(self):
        w = fw.Worker("http://flint.invalid", api_key="k", handlers={})

        @w.handler("a.b")
        def ab(job):
            return 1

        self.assertIs(w.handlers["a.b"], ab)
        with self.assertRaises(ValueError):
            w.handler("a.b")(ab)

    def test_schemas_ride_with_the_registration(self):
        w = fw.Worker("http://flint.invalid", api_key="k", handlers={}, version="2.1")

        @w.handler("a.b", schema={"type": "object", "required": ["n"]})
        def ab(job):
            return 1

        @w.handler("a.c")
        def ac(job):
            return 1

        self.assertEqual(w.schemas, {"a.b": {"type": "object", "required": ["n"]}})
        with self.assertRaises(ValueError):
            w.handler("a.d", schema="object")
        with self.assertRaises(ValueError):
            fw.Worker("http://flint.invalid", api_key="k", handlers={}, schemas={"a.e": ["x"]})
        sent = []
        w._call = lambda method, path, body, **kw: sent.append(body) or {"id": "w1"}
        self.assertTrue(w._register())
        self.assertEqual(sent[0]["schemas"], {"a.b": {"type": "object", "required": ["n"]}})
        self.assertTrue(sent[0]["version"].startswith("2.1 (Python "))

    def test_settings_are_checked(self):
        for kw in ({"concurrency": 0}, {"prefetch": -1}, {"wait_seconds": 31}, {"claimers": 0}, {"claimers": 9}):
            with self.assertRaises(ValueError):
                fw.Worker("http://flint.invalid", api_key="k", **kw)
        with self.assertRaises(ValueError):
            fw._Conn("ftp://x", "k", "ua")

    def test_room(self):
        w = fw.Worker("http://flint.invalid", api_key="k", concurrency=10, prefetch=190, handlers={})
        self.assertEqual(w._room(), 100, "a claim asks for at most 100")
        w._held = {i: None for i in range(150)}
        w._waiting = 60
        self.assertEqual(w._room(), 0, "jobs wait locally and less than half is free: no claim yet")
        w._held = {i: None for i in range(90)}
        self.assertEqual(w._room(), 100)
        w._waiting = 0
        w._held = {i: None for i in range(199)}
        self.assertEqual(w._room(), 1, "an idle thread claims even one")
        w._held = {}
        w._asking = 100
        self.assertEqual(w._room(), 100, "a second claimer asks while the first waits")
        w._asking = 150
        self.assertEqual(w._room(), 0, "claims in flight count against the room")


class ExpiryTest(unittest.TestCase):
    def test_only_leases_not_renewed_within_a_lease_expire(self):
        w = fw.Worker("http://flint.invalid", api_key="k", handlers={})
        w.lease_seconds = 30
        old, fresh = job(id="old"), job(id="fresh")
        old._renewed = 100.0
        fresh._renewed = 125.0  # claimed after the last heartbeat that got through
        w._held = {"old": old, "fresh": fresh}
        self.assertEqual(w._expired(131.0), [old])
        self.assertEqual(w._expired(129.0), [])


class AmendTest(unittest.TestCase):
    """A finish Flint refused (422, nothing applied) is mended and sent again."""

    def setUp(self):
        self.w = fw.Worker("http://flint.invalid", api_key="k", handlers={})
        self.jobs = [job(id="j%d" % i) for i in range(3)]
        for j in self.jobs:
            self.w._held[j.id] = j
        self.batch = [(j, fw.outcome_of(j, {"i": j.id})) for j in self.jobs]

    def test_index(self):
        self.assertEqual(fw._outcome_index("outcomes[12].result"), (12, "result"))
        self.assertEqual(fw._outcome_index("outcomes[0]"), (0, ""))
        self.assertIsNone(fw._outcome_index("outcomes"))

    def test_refused_result_fails_that_job_for_good(self):
        out = self.w._amend(self.batch, fw.FlintError(422, "invalid", "is too big", "outcomes[1].result"))
        self.assertEqual(len(out), 3)
        self.assertEqual(out[0], self.batch[0])
        self.assertEqual((out[1][1]["status"], out[1][1]["retryable"]), ("failed", False))
        self.assertIn("is too big", out[1][1]["error"])

    def test_job_claimed_before_reregistering_is_dropped(self):
        out = self.w._amend(self.batch, fw.FlintError(422, "invalid", "never claimed", "outcomes[2].job_id"))
        self.assertEqual([j.id for j, _ in out], ["j0", "j1"])
        self.assertNotIn("j2", self.w._held)
        self.assertEqual(self.w.stats["lost"], 1)

    def test_unmendable_outcome_is_dropped(self):
        out = self.w._amend(self.batch, fw.FlintError(422, "invalid", "x", "outcomes[0].result"))
        out = self.w._amend(out, fw.FlintError(422, "invalid", "x", "outcomes[0].error"))
        self.assertEqual([j.id for j, _ in out], ["j1", "j2"])


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers = []   # (status, body, headers) served in order
    seen = []

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n)) if n else None
        Handler.seen.append((self.path, self.headers.get("X-API-Key"), body))
        status, answer, headers = Handler.answers.pop(0)
        if status is None:  # hang until the client gives up
            time.sleep(answer)
            return
        raw = json.dumps(answer).encode()
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


class ConnTest(unittest.TestCase):
    def setUp(self):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        Handler.answers, Handler.seen = [], []

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()

    def test_json_and_key(self):
        Handler.answers = [(200, {"ok": True}, {})]
        c = fw._Conn(self.url, "secret", "ua")
        self.assertEqual(c.request("POST", "/api/v1/x", {"a": 1}), {"ok": True})
        self.assertEqual(Handler.seen, [("/api/v1/x", "secret", {"a": 1})])
        c.close()

    def test_error_answer(self):
        Handler.answers = [(422, {"error": {"code": "invalid", "message": "must be 1-100", "field": "max"}}, {}),
                           (503, {"error": {"code": "unavailable"}}, {"Retry-After": "7"})]
        c = fw._Conn(self.url, "k", "ua")
        with self.assertRaises(fw.FlintError) as e:
            c.request("POST", "/x", {})
        self.assertEqual((e.exception.status, e.exception.field, e.exception.retryable), (422, "max", False))
        with self.assertRaises(fw.FlintError) as e:
            c.request("POST", "/x", {})
        self.assertEqual((e.exception.retryable, e.exception.retry_after), (True, 7.0))
        c.close()

    def test_call_retries_server_errors(self):
        Handler.answers = [(500, {}, {}), (502, {}, {}), (200, {"n": 3}, {})]
        w = fw.Worker(self.url, api_key="k", handlers={})
        fw_backoff = fw.backoff
        fw.backoff = lambda attempt: 0.01
        try:
            self.assertEqual(w._call("POST", "/x", {}, retry_until=lambda: True), {"n": 3})
        finally:
            fw.backoff = fw_backoff
            w._conn().close()
        self.assertEqual(len(Handler.seen), 3)

    def test_abort_ends_a_long_poll_without_retrying(self):
        Handler.answers = [(None, 5, {}), (200, {"jobs": []}, {})]
        c = fw._Conn(self.url, "k", "ua")
        threading.Timer(0.2, c.abort).start()
        start = time.monotonic()
        with self.assertRaises(fw._NetworkError):
            c.request("POST", "/claim", {"wait_seconds": 5}, timeout=10)
        self.assertLess(time.monotonic() - start, 3)
        self.assertEqual(len(Handler.seen), 1, "an aborted request is not sent again")

    def test_unreachable(self):
        c = fw._Conn("http://127.0.0.1:1", "k", "ua")
        with self.assertRaises(fw._NetworkError):
            c.request("POST", "/x", {}, timeout=2)

    def test_backoff_bounds(self):
        for attempt in range(30):
            d = fw.backoff(attempt)
            self.assertGreaterEqual(d, 0.25)
            self.assertLessEqual(d, 30)


if __name__ == "__main__":
    unittest.main()
