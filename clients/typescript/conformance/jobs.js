// The conformance suite's job types (docs/conformance.md), for the
// TypeScript worker: flint-worker conformance/jobs.js. Marks are
// files in FLINT_CONFORMANCE_DIR named <kind>-<job id>-<attempt>-<nonce>.

import { randomUUID } from "node:crypto";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Fail, Retry, SELF } from "../index.js";

const dir = process.env.FLINT_CONFORMANCE_DIR;
const mark = (kind, job) => writeFileSync(join(dir, `${kind}-${job.id}-${job.attempt}-${randomUUID()}`), "");

/** Payload schemas the worker declares when it registers. */
export const schemas = {
  "conformance.broken": { type: "object", required: ["message"], properties: { message: { type: "string" } } },
};

export default {
  "conformance.echo": (job) => {
    job.log("echoing", { n: job.payload?.n ?? null });
    return { echo: job.payload, attempt: job.attempt };
  },
  "conformance.flaky": (job) => {
    if (job.attempt === 1) throw new Retry("the first attempt fails", { after: 0.1 });
    return { attempt: job.attempt };
  },
  "conformance.broken": (job) => {
    throw new Fail(job.payload.message);
  },
  "conformance.gated": async (job) => {
    mark("start", job);
    job.progress(40, "halfway");
    while (!existsSync(join(dir, "release"))) {
      if (job.stopped) {
        mark("stopped", job);
        return null;
      }
      await sleep(10);
    }
    mark("done", job);
    return { released: true };
  },
  "conformance.work": async (job) => {
    mark("start", job);
    await sleep(job.payload.ms);
    return { pid: process.pid };
  },
  "conformance.fetch": (job) => ({ name: job.payload.name, width: 1024 }),
  "conformance.resize": (job) => {
    const img = job.parent("fetch");
    return { thumb: "thumb-" + img.name, width: Math.min(img.width, 128) };
  },
  "conformance.fanout": (job) => {
    const keys = job.payload.numbers.map((n, i) => {
      job.spawn(`square-${i}`, "conformance.square", { n }, { depends_on: [SELF] });
      return `square-${i}`;
    });
    job.spawn("total", "conformance.total", null, { depends_on: keys });
    return { squares: keys.length };
  },
  "conformance.order": async (job) => {
    const charge = await job.step("charge", () => (mark("charge", job), { id: "ch_" + job.payload.order }));
    const invoice = await job.step("invoice", () => "INV-" + charge.id);
    await job.step("email", () => {
      mark("email", job);
      if (job.attempt === 1) throw new Retry("mail server said 451", { after: 0.1 });
      return true;
    });
    return { charge: charge.id, invoice };
  },
  "conformance.refund": async (job) => {
    const sig = await job.waitForSignal("approval", job.payload.timeout ?? 48 * 3600);
    return sig.timedOut ? { refunded: false } : { refunded: true, by: sig.body.by };
  },
  "conformance.paid": async (job) => {
    const ev = await job.waitForEvent("order.paid:" + job.payload.order);
    return { paid: ev.body.amount };
  },
  "conformance.nap": async (job) => {
    await job.step("before", () => mark("before", job));
    await job.sleep("cool-off", 1);
    return job.step("after", () => "woke");
  },
  "conformance.reorder": async (job) => {
    // The second attempt reaches its steps in another order: a code change
    // between attempts, which must fail the job for good.
    const names = job.attempt === 1 ? ["a", "b"] : ["b", "a"];
    for (const n of names) await job.step(n, () => n);
    if (job.attempt === 1) throw new Retry("again", { after: 0.1 });
    return "unreachable";
  },
  "conformance.square": (job) => job.payload.n * job.payload.n,
  "conformance.total": (job) => ({ sum: Object.keys(job.parents).reduce((s, k) => s + job.parent(k), 0) }),
};
