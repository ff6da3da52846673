// Command invoices is Flint with job types of its own, "invoice.total" and
// "invoice.seen": the stock flint binary plus two handlers, with every
// subcommand, flag and setting of flint (go run . serve; go run . worker
// beside a stock API).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/flinthq/flint/app"
	"github.com/flinthq/flint/jobs"
)

// Invoice is the payload. Unknown fields, or values Validate refuses, are
// answered 422 at enqueue, before a job exists. Flint derives a JSON
// Schema from the struct, its jsonschema tags included, and stores it with
// the type, so every API process (a stock flint too) refuses a payload
// that does not fit, naming the field (payload.lines[0].quantity).
type Invoice struct {
	Currency string `json:"currency" jsonschema:"required,minLength=3,maxLength=3"`
	Lines    []Line `json:"lines" jsonschema:"required,minItems=1"`
}

// Line is one line of an invoice.
type Line struct {
	Description string `json:"description"`
	Quantity    int    `json:"quantity" jsonschema:"required,minimum=1"`
	UnitCents   int64  `json:"unit_cents" jsonschema:"required,minimum=0"`
}

// Validate implements jobs.ArgsValidator.
func (inv Invoice) Validate() error {
	if len(inv.Currency) != 3 {
		return errors.New("currency must be a three-letter code such as EUR")
	}
	if len(inv.Lines) == 0 {
		return errors.New("lines must hold at least one line")
	}
	for i, l := range inv.Lines {
		if l.Quantity < 1 || l.UnitCents < 0 {
			return fmt.Errorf("lines[%d]: quantity must be at least 1 and unit_cents not negative", i)
		}
	}
	return nil
}

// Seen is invoice.seen's payload: an invoice a customer opened.
type Seen struct {
	Invoice string `json:"invoice" jsonschema:"required,minLength=1"`
}

// Validate implements jobs.ArgsValidator.
func (s Seen) Validate() error {
	if s.Invoice == "" {
		return errors.New("invoice must name the invoice opened")
	}
	return nil
}

// Total is invoice.total's result.
type Total struct {
	Currency   string `json:"currency"`
	Lines      int    `json:"lines"`
	TotalCents int64  `json:"total_cents"`
}

// total adds up the lines, reporting progress and writing to the job's log.
func total(ctx context.Context, job *jobs.Job, inv Invoice) (any, error) {
	var sum int64
	for i, l := range inv.Lines {
		if err := ctx.Err(); err != nil {
			return nil, err // cancelled, timed out or shutting down
		}
		sum += int64(l.Quantity) * l.UnitCents
		jobs.ReportProgress(ctx, 100*(i+1)/len(inv.Lines), l.Description)
	}
	jobs.Logger(ctx).Info("invoice added up", "lines", len(inv.Lines), "total_cents", sum)
	return Total{Currency: inv.Currency, Lines: len(inv.Lines), TotalCents: sum}, nil
}

// seen would record that a customer opened an invoice; this example keeps
// no records, so it has nothing to do, and its drain rate is what Flint
// itself costs a type of one's own (make bench BENCH=ExampleTypeDrain
// BENCHPKG=./internal/e2e compares it with the built-in noop).
func seen(context.Context, *jobs.Job, Seen) (any, error) { return nil, nil }

func main() {
	a := app.New()
	a.Handle("invoice.total", jobs.Typed(total)) // jobs.HandlerFunc for untyped payloads
	a.Handle("invoice.seen", jobs.Typed(seen))
	os.Exit(a.Main(os.Args[1:]))
}
