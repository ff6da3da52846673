package domain

import "github.com/flinthq/flint/jobs"

// ReplayFrom are the states whose payload an operator may edit before a
// replay: the dead-letter queue only. A running job's handler holds the
// payload it started with, and a waiting job is better cancelled and
// enqueued anew.
var ReplayFrom = []jobs.State{jobs.StateDeadLetter}

// AuditEditReplay is the audit action of an edit and replay; its details
// hold payload_before and payload_after.
const AuditEditReplay = "edit_replay"
