// Tests against a real Flint: internal/e2e (TestTypeScriptClient) starts
// flint serve and runs these with FLINT_URL, FLINT_API_KEY (all scopes),
// FLINT_WORK_KEY (work scope only). Without FLINT_URL they are skipped.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  AuthError, Cancel, Client, ConflictError, Fail, FlintError, NetworkError, NotFoundError, Retry, SELF, ValidationError, Worker,
} from "../index.js";

const url = process.env.FLINT_URL;
const skip = url ? false : "FLINT_URL is not set: no Flint to test against";
const client = () => new Client({ url, apiKey: process.env.FLINT_API_KEY });

/** Polls the job until cond(job) holds (30 s at most). */
async function until(c, id, cond, what) {
  const deadline = Date.now() + 30000;
  for (;;) {
    const job = await c.getJob(id);
    if (cond(job)) return job;
    if (Date.now() > deadline) assert.fail(`timed out waiting for job ${id} to be ${what}: ${JSON.stringify(job)}`);
    await sleep(50); // the poll interval
  }
}

test("enqueue one job, with an idempotency key", { skip }, async () => {
  const c = client();
  const job = await c.enqueue({ type: "ts.echo", payload: { n: 1 }, priority: "high", queue: "ts", delay_seconds: 3600 });
  assert.equal(job.created, true);
  assert.equal(job.type, "ts.echo");
  assert.equal(job.status, "scheduled");
  assert.equal(job.priority, 1);
  assert.deepEqual((await c.getJob(job.id)).payload, { n: 1 });

  const key = `invoice-${job.id}`;
  const first = await c.enqueue({ type: "ts.echo", idempotency_key: key, delay_seconds: 3600 });
  const again = await c.enqueue({ type: "ts.echo", idempotency_key: key, delay_seconds: 3600 });
  assert.equal(first.created, true);
  assert.equal(again.created, false, "a repeated key returns the first job");
  assert.equal(again.id, first.id);
});

test("enqueue a batch and a workflow", { skip }, async () => {
  const c = client();
  const jobs = await c.enqueueBatch([1, 2, 3].map((n) => ({ type: "ts.echo", payload: { n }, delay_seconds: 3600 })));
  assert.equal(jobs.length, 3);
  assert.deepEqual(jobs.map((j) => j.payload.n), [1, 2, 3]);

  const wf = await c.enqueueWorkflow([
    { key: "fetch", type: "ts.echo", delay_seconds: 3600 },
    { key: "resize", type: "ts.echo", depends_on: ["fetch"] },
  ]);
  assert.deepEqual(wf.map((j) => [j.key, j.status]), [["fetch", "scheduled"], ["resize", "blocked"]]);
  const { jobs: page } = await c.listJobs({ status: "blocked", type: "ts.echo", limit: 10 });
  assert.ok(page.some((j) => j.id === wf[1].id));
  const { jobs: newest } = await c.listJobs({ type: "ts.echo", status: "scheduled", limit: 500 });
  const { jobs: oldest } = await c.listJobs({ type: "ts.echo", status: "scheduled", limit: 500, sort: "oldest" });
  assert.ok(newest.length >= 4);
  assert.deepEqual(oldest.map((j) => j.id), newest.map((j) => j.id).reverse(), "oldest first is newest first reversed");
});

test("refusals are typed errors that name the field", { skip }, async () => {
  const c = client();
  const refused = async (p, cls, field, code) => {
    const e = await p.then(() => assert.fail("accepted"), (e) => e);
    assert.ok(e instanceof cls, `${e.name}: ${e.message}`);
    assert.ok(e instanceof FlintError);
    if (field !== undefined) assert.equal(e.field, field, e.message);
    if (code) assert.equal(e.code, code);
    return e;
  };
  let e = await refused(c.enqueue({ type: "ts.echo", priority: "urgent" }), ValidationError, "priority", "validation_failed");
  assert.equal(e.status, 422);
  assert.equal(e.retryable, false);
  e = await refused(c.enqueue({ type: "no.such.type" }), ValidationError, "type");
  assert.match(e.detail, /unknown job type "no.such.type"/);
  await refused(c.enqueueBatch([{ type: "ts.echo" }, { type: "ts.echo", max_retries: -1 }]), ValidationError, "jobs[1].max_retries");
  await refused(c.enqueueWorkflow([
    { key: "a", type: "ts.echo", depends_on: ["b"] },
    { key: "b", type: "ts.echo", depends_on: ["a"] },
  ]), ValidationError);
  await refused(c.getJob("00000000-0000-0000-0000-000000000000"), NotFoundError, undefined, "not_found");
  e = await refused(c.listJobs({ sort: "size" }), ValidationError, "sort", "validation_failed");
  assert.match(e.detail, /created, oldest, started, started_oldest, finished, finished_oldest/);
  const done = await c.enqueue({ type: "ts.echo", delay_seconds: 3600 });
  await c.cancelJob(done.id);
  await refused(c.cancelJob(done.id), ConflictError);
  await refused(new Client({ url, apiKey: "wrong" }).enqueue({ type: "ts.echo" }), AuthError);
  await refused(new Client({ url, apiKey: process.env.FLINT_WORK_KEY }).getJob(done.id), AuthError);
  const down = await new Client({ url: "http://127.0.0.1:1", apiKey: "k" }).getJob("x").then(assert.fail, (e) => e);
  assert.ok(down instanceof NetworkError, down.message);
});

test("a worker's payload schema is enforced at enqueue, naming the field", { skip }, async () => {
  const c = client();
  const worker = new Worker({
    url, apiKey: process.env.FLINT_WORK_KEY, name: "node-schema", queues: ["ts-schema"], version: "3.1.0",
    logger: { debug() {}, info() {}, warn() {}, error() {} },
  });
  worker.handle("ts.invoice", (job) => ({ total: job.payload.lines.length }), {
    schema: {
      type: "object", required: ["currency", "lines"], additionalProperties: false,
      properties: { currency: { type: "string", minLength: 3, maxLength: 3 }, lines: { type: "array", minItems: 1 } },
    },
  });
  const running = worker.run({ installSignals: false });
  try {
    const on = { queue: "ts-schema" };
    let refused;
    const deadline = Date.now() + 15000;
    for (;;) { // until the API knows the type its worker serves
      refused = await c.enqueue({ type: "ts.invoice", payload: { currency: "EURO", lines: [1] }, ...on }).catch((e) => e);
      if (!(refused instanceof ValidationError && refused.field === "type") || Date.now() > deadline) break;
      await sleep(50);
    }
    assert.ok(refused instanceof ValidationError, String(refused));
    assert.equal(refused.field, "payload.currency");
    await assert.rejects(c.enqueue({ type: "ts.invoice", payload: { currency: "EUR" }, ...on }),
      (e) => e instanceof ValidationError && e.field === "payload.lines");
    const ok = await c.enqueue({ type: "ts.invoice", payload: { currency: "EUR", lines: [1, 2] }, ...on });
    assert.deepEqual((await until(c, ok.id, (j) => j.status === "completed", "completed")).result, { total: 2 });
    const info = await fetch(`${url}/api/v1/types/ts.invoice`, { headers: { "X-API-Key": process.env.FLINT_API_KEY } }).then((r) => r.json());
    assert.equal(info.versions[0].by.source, "remote");
    assert.match(info.versions[0].by.worker_version, /^3\.1\.0 \(Node /);
  } finally {
    worker.stop();
  }
  await running;
});

test("a worker runs handlers: results, retries, failures, progress, logs, spawn, cancellation", { skip }, async () => {
  const c = client();
  let release;
  const released = new Promise((r) => (release = r));
  const logs = [];
  const worker = new Worker({
    url, apiKey: process.env.FLINT_WORK_KEY, name: "node-test", concurrency: 4, queues: ["ts-run"],
    logger: { debug() {}, info: (m) => logs.push(m), warn: (m) => logs.push(m), error: (m) => logs.push(m) },
  });
  worker
    .handle("ts.echo", (job) => {
      job.info("echoing", { n: job.payload.n });
      return { echo: job.payload, attempt: job.attempt };
    })
    .handle("ts.flaky", (job) => {
      if (job.attempt === 1) throw new Retry("the first attempt fails", { after: 0.1 });
      return { attempt: job.attempt };
    })
    .handle("ts.broken", () => {
      throw new Fail("no such invoice");
    })
    .handle("ts.refuse", () => {
      throw new Cancel("nothing to do");
    })
    .handle("ts.split", (job) => {
      job.spawn("half", "ts.echo", { n: job.payload.n / 2 }, { depends_on: [SELF], queue: "ts-run" });
      return { split: true };
    })
    .handle("ts.slow", async (job) => {
      job.progress(50, "waiting");
      await Promise.race([released, new Promise((r) => job.signal.addEventListener("abort", r))]);
      job.check();
      return { released: true };
    });
  const running = worker.run({ installSignals: false });
  try {
    const on = { queue: "ts-run" };
    const echo = await c.enqueue({ type: "ts.echo", payload: { n: 7 }, ...on });
    const flaky = await c.enqueue({ type: "ts.flaky", ...on });
    const broken = await c.enqueue({ type: "ts.broken", ...on });
    const refuse = await c.enqueue({ type: "ts.refuse", ...on });
    const split = await c.enqueueWorkflow([{ key: "split", type: "ts.split", payload: { n: 8 }, ...on }]);
    const slow = await c.enqueue({ type: "ts.slow", ...on });
    const cancelled = await c.enqueue({ type: "ts.slow", ...on });

    assert.deepEqual((await until(c, echo.id, (j) => j.status === "completed", "completed")).result, { echo: { n: 7 }, attempt: 1 });
    assert.deepEqual((await until(c, flaky.id, (j) => j.status === "completed", "completed")).result, { attempt: 2 });
    const dead = await until(c, broken.id, (j) => j.status === "dead_letter", "dead");
    assert.equal(dead.attempt, 1);
    assert.equal(dead.last_error, "no such invoice");
    assert.equal((await until(c, refuse.id, (j) => j.status === "cancelled", "cancelled")).last_error, "nothing to do");
    await until(c, split[0].id, (j) => j.status === "completed", "completed");
    const { jobs: spawned } = await c.listJobs({ type: "ts.echo", queue: "ts-run", status: "blocked,queued,running,completed" });
    const half = spawned.find((j) => j.payload.n === 4);
    assert.ok(half, "the split spawned a job: " + JSON.stringify(spawned));
    assert.deepEqual((await until(c, half.id, (j) => j.status === "completed", "completed")).result, { echo: { n: 4 }, attempt: 1 });

    const running = await until(c, slow.id, (j) => j.status === "running" && j.progress === 50, "running with progress");
    assert.equal(running.progress_message, "waiting");
    await until(c, cancelled.id, (j) => j.status === "running", "running");
    await c.cancelJob(cancelled.id);
    await until(c, cancelled.id, (j) => j.status === "cancelled", "cancelled");
    release();
    assert.deepEqual((await until(c, slow.id, (j) => j.status === "completed", "completed")).result, { released: true });

    const page = await fetch(`${url}/api/v1/jobs/${echo.id}/logs`, { headers: { "X-API-Key": process.env.FLINT_API_KEY } }).then((r) => r.json());
    const line = page.entries.find((e) => e.source === "handler");
    assert.deepEqual([line.message, line.level, line.attrs], ["echoing", "info", { n: 7 }]);
  } finally {
    worker.stop();
  }
  const stats = await running;
  assert.ok(stats.completed >= 5, JSON.stringify(stats));
  assert.ok(logs.some((m) => m.startsWith("deregistered ")), logs.join("\n"));
});
