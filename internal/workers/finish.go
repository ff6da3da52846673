package workers

import (
	"context"
	"errors"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// written forgets the executions whose outcomes the finisher has dealt
// with, so heartbeats stop renewing their leases.
func (p *Pool) written(batch []domain.Finish) {
	for _, f := range batch {
		if v, ok := p.running.Load(f.Lease.JobID); ok && v.(*execution).lease == f.Lease {
			p.running.CompareAndDelete(f.Lease.JobID, v)
		}
	}
}

// finisher writes outcomes in batches: it takes what is waiting (up to
// FinishBatch) and writes it in one statement, so the batch grows with load
// and latency stays low when idle.
func (p *Pool) finisher() {
	batch := make([]domain.Finish, 0, p.cfg.FinishBatch)
	for f := range p.finishes {
		batch = append(batch[:0], f)
	fill:
		for len(batch) < p.cfg.FinishBatch {
			select {
			case f, ok := <-p.finishes:
				if !ok {
					break fill
				}
				batch = append(batch, f)
			default:
				break fill
			}
		}
		p.flush(batch)
	}
}

// flush writes one batch. While the database is unreachable it retries
// (the lease guard makes a late write harmless, and the full outcome channel
// holds back claiming meanwhile). If the database refuses the batch's data,
// it writes the rows one at a time so one bad row cannot sink the others.
func (p *Pool) flush(batch []domain.Finish) {
	defer p.written(batch)
	p.awaitLogs(batch)
	ctx := context.Background()
	var moved, cascaded []domain.Moved
	var err error
	for attempt := 1; ; attempt++ {
		p.leaseWrites.Lock()
		moved, cascaded, err = p.store.FinishJobs(ctx, batch)
		p.leaseWrites.Unlock()
		if err == nil {
			break
		}
		if isDataError(err) {
			if len(batch) > 1 {
				p.logger.Warn("outcome batch refused; writing one by one", "error", err, "jobs", len(batch))
				for _, f := range batch {
					p.flush([]domain.Finish{f})
				}
			} else if len(batch[0].Log) > 0 {
				// The lines, not the outcome, may be what was refused:
				// the writer stores what it can of them on its own.
				p.passLog(batch[0])
				batch[0].Log = nil
				continue
			} else {
				p.logger.Error("outcome refused by the database; the reaper will return the job",
					"error", err, "job_id", batch[0].JobID)
			}
			return
		}
		if attempt >= 60 {
			p.logger.Error("giving up writing job outcomes; the reaper will return the jobs",
				"error", err, "jobs", len(batch))
			for _, f := range batch {
				p.passLog(f)
			}
			return
		}
		time.Sleep(min(time.Duration(attempt)*100*time.Millisecond, 2*time.Second))
	}
	if p.flowWaiting.Load() {
		signal(p.notify) // slots of a limited queue opened: claim again
	}
	domain.LogFailures(ctx, p.logger, batch, moved)
	report := moved[:0:0]
	for i, m := range moved {
		if m.LeaseLost() {
			p.logger.Warn("outcome refused: lease lost (the job was reaped or re-claimed)", "job_id", m.JobID)
			p.passLog(batch[i]) // kept, as lines of a lost lease always are
			continue
		}
		report = append(report, m)
	}
	report = append(report, cascaded...)
	if p.cfg.OnMoved != nil && len(report) > 0 {
		p.cfg.OnMoved(report)
	}
}

// jobLogAwait is the longest an outcome waits for its job's log lines.
const jobLogAwait = time.Second

// awaitLogs holds batch's outcomes until the log writer has stored the
// lines their handlers logged through it (at most jobLogAwait), so that a
// job shows finished with its log complete: the job page stops following
// a log once the job has finished, and a line stored after that was seen
// only on a reload. It costs a wait only for a job that logged through
// the writer (a run longer than jobLogLinger, a retry, a suspension), and
// the writer then cuts its linger short.
func (p *Pool) awaitLogs(batch []domain.Finish) {
	var n uint64
	for _, f := range batch {
		if v, ok := p.running.Load(f.Lease.JobID); ok {
			if ex := v.(*execution); ex.lease == f.Lease {
				ex.logMu.Lock()
				n = max(n, ex.loggedThrough)
				ex.logMu.Unlock()
			}
		}
	}
	if !p.jobLogs.waitWritten(n, jobLogAwait) {
		p.logger.Debug("outcomes written before their jobs' log lines", "jobs", len(batch))
	}
}

// passLog hands the log lines that came with f to the log writer, for an
// outcome that did not store them.
func (p *Pool) passLog(f domain.Finish) {
	for _, e := range f.Log {
		p.jobLogs.add(e)
	}
}

// isDataError reports whether err is PostgreSQL refusing the data (SQLSTATE
// classes 22 and 23) rather than a connection problem.
func isDataError(err error) bool {
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		c := st.SQLState()
		return len(c) == 5 && (c[:2] == "22" || c[:2] == "23")
	}
	return false
}
