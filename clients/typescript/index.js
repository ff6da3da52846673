// Flint for Node.js: a client that enqueues jobs and a pull worker that
// runs them. No dependencies; Node 20 or later. Types: index.d.ts.

export { AuthError, ConflictError, FlintError, NetworkError, NotFoundError, ValidationError } from "./http.js";
export { Client, VERSION } from "./client.js";
export { Cancel, Fail, Job, JobStopped, MAX_WAIT_SECONDS, ParentTooLarge, Retry, SELF, Signal, StepOrderChanged, Suspend } from "./job.js";
export { consoleLogger, Worker } from "./worker.js";
