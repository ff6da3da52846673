"""The conformance suite's job types (docs/conformance.md), for the Python
worker: python3 flint_worker.py conformance_jobs. Marks are files in
FLINT_CONFORMANCE_DIR named <kind>-<job id>-<attempt>-<nonce>."""

import os
import time
import uuid

from flint_worker import SELF, Fail, Retry, handler

DIR = os.environ.get("FLINT_CONFORMANCE_DIR", ".")


def mark(kind, job):
    open(os.path.join(DIR, "%s-%s-%d-%s" % (kind, job.id, job.attempt, uuid.uuid4())), "w").close()


@handler("conformance.echo")
def echo(job):
    job.log("echoing", n=(job.payload or {}).get("n"))
    return {"echo": job.payload, "attempt": job.attempt}


@handler("conformance.flaky")
def flaky(job):
    if job.attempt == 1:
        raise Retry("the first attempt fails", after=0.1)
    return {"attempt": job.attempt}


@handler("conformance.broken", schema={"type": "object", "required": ["message"],
                                      "properties": {"message": {"type": "string"}}})
def broken(job):
    raise Fail(job.payload["message"])


@handler("conformance.gated")
def gated(job):
    mark("start", job)
    job.progress(40, "halfway")
    while not os.path.exists(os.path.join(DIR, "release")):
        if job.stopped:
            mark("stopped", job)
            return None
        time.sleep(0.01)
    mark("done", job)
    return {"released": True}


@handler("conformance.work")
def work(job):
    mark("start", job)
    time.sleep(job.payload["ms"] / 1000.0)
    return {"pid": os.getpid()}


@handler("conformance.fetch")
def fetch(job):
    return {"name": job.payload["name"], "width": 1024}


@handler("conformance.resize")
def resize(job):
    img = job.parent("fetch")
    return {"thumb": "thumb-" + img["name"], "width": min(img["width"], 128)}


@handler("conformance.fanout")
def fanout(job):
    keys = []
    for i, n in enumerate(job.payload["numbers"]):
        keys.append("square-%d" % i)
        job.spawn(keys[-1], "conformance.square", {"n": n}, depends_on=[SELF])
    job.spawn("total", "conformance.total", depends_on=keys)
    return {"squares": len(keys)}


@handler("conformance.square")
def square(job):
    return job.payload["n"] ** 2


@handler("conformance.total")
def total(job):
    return {"sum": sum(job.parent(k) for k in job.parents)}


@handler("conformance.order")
def order(job):
    def charge():
        mark("charge", job)
        return {"id": "ch_" + job.payload["order"]}
    c = job.step("charge", charge)
    inv = job.step("invoice", lambda: "INV-" + c["id"])

    def email():
        mark("email", job)
        if job.attempt == 1:
            raise Retry("mail server said 451", after=0.1)
        return True
    job.step("email", email)
    return {"charge": c["id"], "invoice": inv}


@handler("conformance.refund")
def refund(job):
    sig = job.wait_for_signal("approval", timeout=job.payload.get("timeout", 48 * 3600))
    if sig.timed_out:
        return {"refunded": False}
    return {"refunded": True, "by": sig.body["by"]}


@handler("conformance.paid")
def paid(job):
    ev = job.wait_for_event("order.paid:" + job.payload["order"])
    return {"paid": ev.body["amount"]}


@handler("conformance.nap")
def nap(job):
    job.step("before", lambda: mark("before", job))
    job.sleep("cool-off", 1)
    return job.step("after", lambda: "woke")


@handler("conformance.reorder")
def reorder(job):
    # The second attempt reaches its steps in another order: a code change
    # between attempts, which must fail the job for good.
    names = ["a", "b"] if job.attempt == 1 else ["b", "a"]
    for n in names:
        job.step(n, lambda n=n: n)
    if job.attempt == 1:
        raise Retry("again", after=0.1)
    return "unreachable"
