package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// DatabaseURL is Flint's database (DATABASE_URL), migrated by a Flint
	// process or `flint migrate`. Required.
	DatabaseURL string
	// MaxConns caps the client's connection pool; zero means 4.
	MaxConns int32
	// JobTypes are types accepted besides those registered with Handle and
	// those a worker has been seen serving (as FLINT_JOB_TYPES is for the
	// API).
	JobTypes []string
	// EnqueueWindow and EnqueueBatch shape the group commit of single
	// enqueues (see Client.Enqueue): how long a batch waits for more jobs
	// after its first, and the most jobs it holds. Zero means 1 ms and
	// 500; a negative EnqueueWindow turns group commit off.
	EnqueueWindow time.Duration
	EnqueueBatch  int // the most jobs of one group commit; zero means 500
}

// Client enqueues jobs from Go: in transactions of its own (Enqueue) or
// in the caller's pgx transaction (EnqueueTx), with the checks the API
// makes. A job's type must be registered with Handle in this program,
// served by a worker seen in the last 24 hours, or named in JobTypes; a
// typed handler's payload is decoded and validated before anything is
// written. A refused request returns a *jobs.ValidationError naming the
// field.
//
// A Client is safe for concurrent use. Close it when done.
type Client struct {
	store *db.Store
	types *domain.Catalog
	clock jobs.Clock
}

// NewClient connects to Flint's database for enqueueing.
func (a *App) NewClient(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("app: NewClient needs ClientConfig.DatabaseURL")
	}
	for _, t := range cfg.JobTypes {
		if !jobs.ValidType(t) {
			return nil, fmt.Errorf("app: ClientConfig.JobTypes: %q is not a valid job type", t)
		}
	}
	maxConns := cfg.MaxConns
	if maxConns <= 0 {
		maxConns = 4
	}
	store, err := db.Open(ctx, db.Config{URL: cfg.DatabaseURL, MaxConns: maxConns,
		EnqueueWindow: cfg.EnqueueWindow, EnqueueBatch: cfg.EnqueueBatch})
	if err != nil {
		return nil, err
	}
	// The API processes' dashboards hear of the client's jobs over NOTIFY,
	// sent after each commit.
	store.SetEventSink(store.NotifyEventSink())
	// Built-in handlers are registered without their senders: the client
	// only asks them to check payloads.
	reg := a.registry(domain.BuiltinDeps{Mailer: noMailer{}})
	types := domain.NewCatalog(reg, cfg.JobTypes, store.ServedTypes)
	types.UseSchemas(store)
	return &Client{store: store, types: types, clock: jobs.SystemClock{}}, nil
}

// Close closes the client's connections.
func (c *Client) Close() { c.store.Close() }

// validate checks params as the API does, filling their defaults.
func (c *Client) validate(ctx context.Context, params []jobs.EnqueueParams) error {
	if len(params) == 0 {
		return errors.New("app: enqueue: no jobs given")
	}
	now := c.clock.Now()
	for i := range params {
		c.types.Prepare(ctx, params[i].Type, params[i].Queue)
		if err := params[i].Validate(c.types, now); err != nil {
			var ve *jobs.ValidationError
			if len(params) > 1 && errors.As(err, &ve) {
				return jobs.Invalid(fmt.Sprintf("jobs[%d].%s", i, ve.Field), "%s", ve.Message)
			}
			return err
		}
	}
	return nil
}

// Enqueue creates jobs, all of them or none, in one transaction of its
// own, and returns them in order once it has committed. A job whose
// idempotency key is taken comes back as the existing job with Inserted
// false.
//
// A single job without dependencies or a recurrence, enqueued while other
// goroutines enqueue theirs, shares one transaction (one multi-row insert,
// one commit) with theirs: a group commit. Each caller still gets its own
// answer, only after its job is durable, and a job that fails does not
// fail the others.
func (c *Client) Enqueue(ctx context.Context, params ...jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	params = append([]jobs.EnqueueParams(nil), params...)
	if err := c.validate(ctx, params); err != nil {
		return nil, err
	}
	out, err := c.store.Enqueue(ctx, params...)
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	return out, nil
}

// EnqueueTx creates jobs in the caller's transaction tx (from any pgx
// connection or pool to Flint's database): they exist, and workers and
// the dashboard hear of them, only if tx commits. Use it to enqueue in
// the same transaction as the change the jobs follow from, so that
// neither can happen without the other:
//
//	tx, err := pool.Begin(ctx)
//	...
//	_, err = tx.Exec(ctx, `INSERT INTO orders ...`)
//	_, err = client.EnqueueTx(ctx, tx, jobs.EnqueueParams{Type: "send_receipt", Payload: payload})
//	err = tx.Commit(ctx)
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, params ...jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if tx == nil {
		return nil, errors.New("app: EnqueueTx needs a transaction")
	}
	params = append([]jobs.EnqueueParams(nil), params...)
	if err := c.validate(ctx, params); err != nil {
		return nil, err
	}
	out, err := db.EnqueueTx(ctx, tx, params...)
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	if err := db.AnnounceTx(ctx, tx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// noMailer stands in for the mailer of send_email, whose handler the
// client uses only to check payloads.
type noMailer struct{}

func (noMailer) Send(context.Context, domain.Email) error {
	return errors.New("a client does not send email")
}
