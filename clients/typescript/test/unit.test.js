// Unit tests: no Flint needed (node --test test/).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import * as flint from "../index.js";
import { Job, outcomeOf } from "../job.js";

const hooks = { beatSoon() {}, logged() {} };
const job = (extra = {}) => new Job({ id: "j1", type: "t", lease_token: "tok", attempt: 1, payload: { a: 1 }, ...extra }, hooks);

test("every export is declared in index.d.ts", () => {
  const dts = readFileSync(new URL("../index.d.ts", import.meta.url), "utf8");
  for (const name of Object.keys(flint)) {
    assert.match(dts, new RegExp(`export declare (class|const|function) ${name}\\b`), name);
  }
});

test("a handler's return and throws become outcomes", () => {
  const j = job();
  assert.deepEqual(outcomeOf(j, { ok: true }, undefined, false), { job_id: "j1", lease_token: "tok", status: "completed", result: { ok: true } });
  assert.deepEqual(outcomeOf(j, undefined, undefined, false), { job_id: "j1", lease_token: "tok", status: "completed" });
  assert.deepEqual(outcomeOf(j, undefined, new flint.Retry("later", { after: 7 }), true),
    { job_id: "j1", lease_token: "tok", status: "failed", error: "later", retry_after_seconds: 7 });
  assert.deepEqual(outcomeOf(j, undefined, new flint.Fail("bad"), true),
    { job_id: "j1", lease_token: "tok", status: "failed", retryable: false, error: "bad" });
  assert.deepEqual(outcomeOf(j, undefined, new flint.Cancel("stop"), true),
    { job_id: "j1", lease_token: "tok", status: "cancelled", error: "stop" });
  assert.deepEqual(outcomeOf(j, undefined, new TypeError("x is undefined"), true),
    { job_id: "j1", lease_token: "tok", status: "failed", error: "TypeError: x is undefined" });
  assert.deepEqual(outcomeOf(j, undefined, "a string", true),
    { job_id: "j1", lease_token: "tok", status: "failed", error: 'thrown: "a string"' });
  const cyclic = {};
  cyclic.self = cyclic;
  const o = outcomeOf(j, cyclic, undefined, false);
  assert.equal(o.status, "failed");
  assert.equal(o.retryable, false);
  assert.match(o.error, /not JSON/);
  assert.equal(outcomeOf(j, undefined, new Error("x".repeat(9000)), true).error.length, 8000);
});

test("an outcome carries the attempt's traceparent", () => {
  const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const traced = job({ traceparent: tp });
  assert.equal(traced.traceparent, tp);
  assert.equal(outcomeOf(traced, 1, undefined, false).traceparent, tp);
  assert.equal(outcomeOf(traced, undefined, new flint.Fail("bad"), true).traceparent, tp);
  assert.equal(job().traceparent, null);
  assert.equal("traceparent" in outcomeOf(job(), 1, undefined, false), false);
});

test("spawn checks its keys and options and rides on the completion", () => {
  const j = job();
  j.spawn("a", "t", { n: 1 }, { depends_on: [flint.SELF], priority: "high" });
  assert.throws(() => j.spawn("a", "t"), /spawned twice/);
  assert.throws(() => j.spawn("$x", "t"), /does not start with \$/);
  assert.throws(() => j.spawn("b", "t", null, { colour: "red" }), /unknown options: colour/);
  assert.deepEqual(outcomeOf(j, 1, undefined, false).spawn,
    [{ key: "a", type: "t", payload: { n: 1 }, depends_on: ["$self"], priority: "high" }]);
});

test("parents, a parent too large, and a batch", () => {
  const j = job({ parents: { fetch: { w: 1 }, big: { too_large: true, bytes: 9000000 }, batch: { id: "b", total: 2, counts: {} } } });
  assert.deepEqual(j.parent("fetch"), { w: 1 });
  assert.throws(() => j.parent("nope"), RangeError);
  assert.throws(() => j.parent("big"), (e) => e instanceof flint.ParentTooLarge && e.bytes === 9000000);
  assert.equal(j.batch.id, "b");
  assert.equal(job().batch, null);
});

test("progress and log lines are checked and buffered", () => {
  const j = job();
  assert.throws(() => j.progress(101), RangeError);
  j.progress(40.7, "halfway");
  assert.deepEqual(j._lease(), [{ job_id: "j1", lease_token: "tok", progress: 40, progress_message: "halfway" }, [40, "halfway"]]);
  assert.deepEqual(j._lease()[0], { job_id: "j1", lease_token: "tok" }, "progress is sent once");
  assert.throws(() => j.log("x", {}, "loud"), TypeError);
  j.warn("careful", { n: 1, obj: { deep: true } });
  const [line] = j._takeLines();
  assert.equal(line.level, "warn");
  assert.deepEqual(line.attrs, { n: 1, obj: '{"deep":true}' });
});

test("a stopped job aborts its signal and check() throws", () => {
  const j = job();
  j.check();
  j._stop("test");
  assert.ok(j.stopped);
  assert.ok(j.signal.aborted);
  assert.throws(() => j.check(), flint.JobStopped);
});

test("options are checked", () => {
  assert.throws(() => new flint.Client({ url: "ftp://x", apiKey: "k" }), /http\(s\)/);
  assert.throws(() => new flint.Worker({ url: "http://x", apiKey: "k", concurrency: 0 }), RangeError);
  assert.throws(() => new flint.Worker({ url: "http://x", apiKey: "k", waitSeconds: 31 }), RangeError);
  const w = new flint.Worker({ url: "http://x", apiKey: "k" });
  w.handle("a", () => 1);
  assert.throws(() => w.handle("a", () => 2), /registered already/);
});

test("a request times out, and the caller's signal aborts it", async () => {
  const { createServer } = await import("node:net");
  const { request } = await import("../http.js");
  const silent = createServer(() => {}); // accepts, never answers
  await new Promise((r) => silent.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${silent.address().port}`;
  try {
    await assert.rejects(request(base, "k", "ua", "GET", "/x", undefined, { timeoutMs: 200 }),
      (e) => e instanceof flint.NetworkError && /timed out/.test(e.message));
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(), 50);
    await assert.rejects(request(base, "k", "ua", "GET", "/x", undefined, { signal: ctl.signal }),
      (e) => e instanceof flint.NetworkError && /aborted/.test(e.message));
  } finally {
    silent.close();
  }
});
