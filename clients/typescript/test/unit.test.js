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

test("steps run once, in their recorded order, and waits suspend", async () => {
  const recorded = [];
  const starts = [];
  const rec = { ...hooks, recordStep: async (j, name, result, started) => (recorded.push([name, result]), starts.push(started), { result }) };
  const first = new Job({ id: "j1", type: "t", lease_token: "tok", attempt: 1 }, rec);
  let runs = 0;
  assert.equal(await first.step("charge", () => (runs++, "ch_1")), "ch_1");
  assert.deepEqual(recorded, [["charge", "ch_1"]]);
  await assert.rejects(first.step("charge", () => 1), /used twice/);

  const again = new Job({ id: "j1", type: "t", lease_token: "tok2", attempt: 2, steps: { charge: "ch_1", invoice: "INV" } }, rec);
  assert.equal(await again.step("charge", () => (runs++, "other")), "ch_1", "a recorded step returns its result");
  assert.equal(await again.step("invoice", () => (runs++, "other")), "INV");
  assert.equal(runs, 1, "recorded steps do not run again");
  assert.ok(starts[0] instanceof Date, "a step that ran goes with its start");
  again.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  assert.deepEqual(outcomeOf(again, "ok", undefined, false).replayed_steps, ["charge", "invoice"], "replayed steps go with the outcome");
  const swapped = new Job({ id: "j1", type: "t", lease_token: "t3", steps: { charge: 1, invoice: 2 } }, rec);
  await assert.rejects(swapped.step("invoice", () => 0), flint.StepOrderChanged);
  const inserted = new Job({ id: "j1", type: "t", lease_token: "t4", steps: { charge: 1 } }, rec);
  await assert.rejects(inserted.step("refund", () => 0), flint.StepOrderChanged);
  // Index-like names lose their JSON order in an object: a new name before
  // recorded ones is still caught, a recorded one is not mistaken for a swap.
  const indexed = new Job({ id: "j1", type: "t", lease_token: "t5", steps: { 10: "a", 9: "b" } }, rec);
  assert.equal(await indexed.step("10", () => 0), "a");
  assert.equal(await indexed.step("9", () => 0), "b");
  const indexedNew = new Job({ id: "j1", type: "t", lease_token: "t6", steps: { 2: "a" } }, rec);
  await assert.rejects(indexedNew.step("1", () => 0), flint.StepOrderChanged);

  const napper = new Job({ id: "j1", type: "t", lease_token: "t7" }, rec);
  const slept = await napper.sleep("cool-off", 60).catch((e) => e);
  assert.ok(slept instanceof flint.Suspend);
  assert.equal(outcomeOf(napper, undefined, slept, true).status, "sleeping");
  assert.equal(recorded.at(-1)[0], "cool-off");
  const woken = new Job({ id: "j1", type: "t", lease_token: "t8", steps: { "cool-off": { wake_at: new Date(Date.now() - 1000).toISOString() } } }, rec);
  await woken.sleep("cool-off", 60); // resolves: the time has come
  await assert.rejects(napper.sleep("x", 0), /out of range/);

  const waiter = new Job({ id: "j1", type: "t", lease_token: "t9" }, rec);
  const w = await waiter.waitForSignal("approval", 3600).catch((e) => e);
  assert.deepEqual(outcomeOf(waiter, undefined, w, true),
    { job_id: "j1", lease_token: "t9", status: "waiting", signal: "approval", timeout_seconds: 3600 });
  const e = await waiter.waitForEvent("order.paid:1").catch((e) => e);
  assert.deepEqual(e.fields, { status: "waiting", event: "order.paid:1" });
  const resumed = new Job({ id: "j1", type: "t", lease_token: "t10", signals: { approval: { body: { by: "ann" }, at: "2026-01-01T00:00:00Z" }, late: { timed_out: true } } }, rec);
  const sig = await resumed.waitForSignal("approval");
  assert.deepEqual([sig.timedOut, sig.body, sig.at], [false, { by: "ann" }, "2026-01-01T00:00:00Z"]);
  assert.equal((await resumed.waitForSignal("late")).timedOut, true);
  const o = outcomeOf(swapped, undefined, new flint.StepOrderChanged("step order changed: x"), true);
  assert.deepEqual([o.status, o.retryable], ["failed", false]);
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
  assert.throws(() => w.handle("b", () => 2, { schema: "object" }), /JSON Schema object/);
  assert.throws(() => new flint.Worker({ url: "http://x", apiKey: "k", schemas: { c: [1] } }), /JSON Schema object/);
  w.handle("d", () => 3, { schema: { type: "object", required: ["n"] } });
  assert.deepEqual(w.schemas.get("d"), { type: "object", required: ["n"] });
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
