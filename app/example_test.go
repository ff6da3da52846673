package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/app"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// Register a handler for a job type of one's own. Every process the App
// runs (Main or Run) then has it: worker pools run the type's jobs, and the
// API and a Client accept them.
func ExampleApp_Handle() {
	a := app.New()
	a.Handle("report.render", jobs.HandlerFunc(func(ctx context.Context, job *jobs.Job) (any, error) {
		var args struct {
			ReportID int `json:"report_id"`
		}
		if err := json.Unmarshal(job.Payload, &args); err != nil {
			return nil, jobs.Permanent(err) // no retry can fix a payload
		}
		// ... render the report, watching ctx, which ends on cancel,
		// timeout or shutdown ...
		return map[string]int{"pages": 12}, nil
	}))
	fmt.Println(a.Types())
	// Output: [report.render]
}

// ResizeArgs is the payload of the resize_image jobs of the examples.
type ResizeArgs struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

// Validate refuses, at enqueue, payloads no attempt could run.
func (r ResizeArgs) Validate() error {
	if r.Width < 1 || r.Width > 4096 {
		return errors.New("width must be between 1 and 4096")
	}
	return nil
}

// A typed handler: jobs.Typed decodes the payload into a struct before the
// handler runs, and at enqueue refuses a payload that does not decode
// (unknown fields included) or that the struct's Validate refuses, so no
// job exists that is bound to fail.
func ExampleApp_Handle_typed() {
	databaseURL, drop := exampleDatabase()
	defer drop()
	ctx := context.Background()

	a := app.New()
	a.Handle("resize_image", jobs.Typed(func(ctx context.Context, job *jobs.Job, args ResizeArgs) (any, error) {
		// ... fetch args.URL and resize it to args.Width ...
		return map[string]int{"width": args.Width}, nil
	}))

	client, err := a.NewClient(ctx, app.ClientConfig{DatabaseURL: databaseURL})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	for _, payload := range []string{
		`{"url": "https://example.com/cat.png", "width": 640}`,
		`{"url": "https://example.com/cat.png", "width": 0}`,
		`{"url": "https://example.com/cat.png", "widht": 640}`,
	} {
		res, err := client.Enqueue(ctx, jobs.EnqueueParams{Type: "resize_image", Payload: json.RawMessage(payload)})
		var invalid *jobs.ValidationError
		switch {
		case errors.As(err, &invalid):
			fmt.Println("refused:", invalid)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println("enqueued:", res[0].Job.Status)
		}
	}
	// Output:
	// enqueued: queued
	// refused: payload: width must be between 1 and 4096
	// refused: payload: unknown field "widht"
}

// Enqueue a job in one's own transaction, with the change it follows from:
// the job exists, and workers hear of it, only if the transaction commits.
func ExampleClient_EnqueueTx() {
	databaseURL, drop := exampleDatabase()
	defer drop()
	ctx := context.Background()

	a := app.New()
	a.Handle("send_receipt", jobs.HandlerFunc(func(ctx context.Context, job *jobs.Job) (any, error) {
		return nil, nil // ... send the receipt ...
	}))
	client, err := a.NewClient(ctx, app.ClientConfig{DatabaseURL: databaseURL})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// The application's own connection (any pgx connection or pool to
	// Flint's database) and its own table.
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE orders (id int PRIMARY KEY, total_cents bigint)`); err != nil {
		log.Fatal(err)
	}

	placeOrder := func(id int, commit bool) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			log.Fatal(err)
		}
		defer tx.Rollback(ctx) // a no-op after Commit
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id, total_cents) VALUES ($1, 4200)`, id); err != nil {
			log.Fatal(err)
		}
		payload, _ := json.Marshal(map[string]int{"order_id": id})
		if _, err := client.EnqueueTx(ctx, tx, jobs.EnqueueParams{Type: "send_receipt", Payload: payload}); err != nil {
			log.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}
	placeOrder(1, true)
	placeOrder(2, false) // rolled back: neither the order nor its receipt

	var orders, receipts int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM jobs WHERE type = 'send_receipt')`).Scan(&orders, &receipts); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", orders, "receipt jobs:", receipts)
	// Output: orders: 1 receipt jobs: 1
}

// Start Flint's roles from a program with its own main and context: here a
// worker pool, which runs the program's handlers until the context ends
// and then drains. LoadConfig reads the settings as the flint binary does;
// this example gives them from a map instead of the environment.
func ExampleApp_Run() {
	databaseURL, drop := exampleDatabase()
	defer drop()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	done := make(chan string, 1)
	a := app.New()
	a.Handle("send_receipt", jobs.Typed(func(ctx context.Context, job *jobs.Job, args struct {
		OrderID int `json:"order_id"`
	}) (any, error) {
		done <- fmt.Sprint("receipt sent for order ", args.OrderID)
		return nil, nil
	}))

	env := map[string]string{
		"DATABASE_URL":        databaseURL,
		"LOG_LEVEL":           "error",
		"FLINT_POLL_INTERVAL": "100ms",
	}
	cfg, err := app.LoadConfig("worker", nil, func(name string) string { return env[name] })
	if err != nil {
		log.Fatal(err)
	}
	cfg.RedisURL = "" // PostgreSQL only: no Redis in this example
	stopped := make(chan error, 1)
	go func() { stopped <- a.Run(ctx, cfg) }()

	client, err := a.NewClient(ctx, app.ClientConfig{DatabaseURL: databaseURL})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Enqueue(ctx, jobs.EnqueueParams{Type: "send_receipt", Payload: json.RawMessage(`{"order_id": 42}`)}); err != nil {
		log.Fatal(err)
	}

	select {
	case msg := <-done:
		fmt.Println(msg)
	case err := <-stopped:
		log.Fatal("worker stopped early: ", err)
	case <-time.After(time.Minute):
		log.Fatal("the job did not run")
	}
	stop() // as SIGTERM would: the pool drains, Run returns
	fmt.Println("stopped:", <-stopped)
	// Output:
	// receipt sent for order 42
	// stopped: <nil>
}

// exampleDatabase returns the URL of a fresh, migrated database for one
// example (from TEST_DATABASE_URL, as the package's tests use, or the local
// server), and a function that drops it. A program of one's own uses its DATABASE_URL.
func exampleDatabase() (url string, drop func()) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		// An example cannot skip, so without the variable (go test -short
		// outside make test) it uses the local server make run sets up.
		os.Setenv("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	}
	tb := &exampleTB{}
	return dbtest.NewDatabase(tb), tb.cleanup
}

// exampleTB lets an example use dbtest, which is written for tests: it
// stops the example on a failure and runs the cleanups when asked.
type exampleTB struct {
	testing.TB // the methods dbtest does not use stay unimplemented
	cleanups   []func()
}

func (*exampleTB) Helper()                         {}
func (*exampleTB) Logf(format string, args ...any) { log.Printf(format, args...) }
func (*exampleTB) Fatal(args ...any)               { log.Fatal(args...) }
func (*exampleTB) Fatalf(format string, args ...any) {
	log.Fatalf(format, args...)
}
func (*exampleTB) Skip(args ...any)    { log.Fatal(args...) }
func (tb *exampleTB) Cleanup(f func()) { tb.cleanups = append(tb.cleanups, f) }
func (tb *exampleTB) cleanup() {
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
}
