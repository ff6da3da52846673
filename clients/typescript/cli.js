#!/usr/bin/env node
// flint-worker [options] module...: imports the modules, each of which
// registers handlers (a default export that is an object of handlers by
// type, or a function given the worker) and may export payload schemas
// (schemas, by type), and runs a worker until SIGTERM or Ctrl-C.

import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { consoleLogger, Worker } from "./index.js";

const usage = `usage: flint-worker [options] module...

Runs the job handlers the modules register (export default {"type": handler}
or export default (worker) => worker.handle("type", handler)), declaring the
payload schemas a module exports as schemas ({"type": JSON Schema}).

  --url URL               Flint's address (FLINT_URL, default http://localhost:8080)
  --queues a,b            queues to work (FLINT_QUEUES; default: all the key may work)
  --concurrency N         handlers running at once (FLINT_CONCURRENCY, default 10)
  --prefetch N            jobs claimed beyond those running (FLINT_PREFETCH, default 0)
  --claimers N            claims in flight at once (1-8, default 1)
  --wait S                seconds one claim waits for work (0-30, default 20)
  --shutdown-timeout S    seconds a graceful stop waits for running jobs (default 30)
  --name NAME             the worker's name in Flint (FLINT_WORKER_NAME; default host:pid)
  --log-level LEVEL       debug, info, warning or error (FLINT_LOG_LEVEL, default info)
The key (work scope) comes from FLINT_API_KEY.`;

function number(name, v, integer = true) {
  const n = Number(v);
  if (v === "" || !Number.isFinite(n) || (integer && !Number.isInteger(n))) throw new RangeError(`--${name} must be a number, not ${JSON.stringify(v)}`);
  return n;
}

async function main(argv) {
  const env = process.env;
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: "string", default: env.FLINT_URL || "http://localhost:8080" },
      queues: { type: "string", default: env.FLINT_QUEUES || "" },
      concurrency: { type: "string", default: env.FLINT_CONCURRENCY || "10" },
      prefetch: { type: "string", default: env.FLINT_PREFETCH || "0" },
      claimers: { type: "string", default: "1" },
      wait: { type: "string", default: "20" },
      "shutdown-timeout": { type: "string", default: "30" },
      name: { type: "string", default: env.FLINT_WORKER_NAME || undefined },
      "log-level": { type: "string", default: env.FLINT_LOG_LEVEL || "info" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help || positionals.length === 0) {
    console.log(usage);
    return values.help ? 0 : 2;
  }
  const worker = new Worker({
    url: values.url,
    name: values.name,
    queues: values.queues.split(",").filter(Boolean),
    concurrency: number("concurrency", values.concurrency),
    prefetch: number("prefetch", values.prefetch),
    claimers: number("claimers", values.claimers),
    waitSeconds: number("wait", values.wait, false),
    shutdownTimeout: number("shutdown-timeout", values["shutdown-timeout"], false),
    logger: consoleLogger(values["log-level"]),
  });
  for (const m of positionals) {
    const mod = await import(m.startsWith(".") || m.startsWith("/") || m.endsWith(".js") || m.endsWith(".mjs") ? pathToFileURL(resolve(m)).href : m);
    const handlers = mod.default;
    if (typeof handlers === "function") handlers(worker);
    else if (handlers && typeof handlers === "object") for (const [type, fn] of Object.entries(handlers)) worker.handle(type, fn);
    else throw new TypeError(`module ${m} has no default export of handlers`);
    for (const [type, schema] of Object.entries(mod.schemas ?? {})) worker.schemas.set(type, schema);
  }
  const stats = await worker.run();
  worker.log.info(`stopped: ${Object.entries(stats).sort().map(([k, v]) => `${k} ${v}`).join(", ")}`);
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e) => {
    console.error(`flint-worker: ${e?.message ?? e}`);
    process.exitCode = 2;
  },
);
