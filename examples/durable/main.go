// Command durable is Flint with job types that use durable execution: an
// order whose card is charged once however often the job runs ("order":
// charge → invoice → email, each a recorded step), a refund that waits
// for a person's approval ("refund": WaitForSignal with a 48-hour
// timeout), and a reminder sent after a durable sleep ("reminder"). It
// has every subcommand, flag and setting of the stock flint binary
// (go run . serve).
//
// The charge and invoice steps append a line to the file named by
// DURABLE_LEDGER, when set: a record outside Flint of every time their
// functions ran, which the tests read. DURABLE_HOLD_INVOICE=1 makes the
// invoice step wait until its job is stopped (the tests kill the process
// there).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/flinthq/flint/app"
	"github.com/flinthq/flint/jobs"
)

// Order is the order job's payload.
type Order struct {
	OrderID     string `json:"order_id"`
	AmountCents int    `json:"amount_cents"`
	Email       string `json:"email"`
}

// Validate implements jobs.ArgsValidator.
func (o Order) Validate() error {
	if o.OrderID == "" || o.AmountCents < 1 {
		return errors.New("order_id is required and amount_cents must be at least 1")
	}
	return nil
}

// Charge is what the payment provider answered.
type Charge struct {
	ID          string `json:"id"`
	AmountCents int    `json:"amount_cents"`
}

// order charges the card, creates the invoice and emails the customer.
// Each step runs once: when the email fails and the job runs again, the
// charge and the invoice are the recorded ones.
func order(ctx context.Context, j *jobs.Job, o Order) (any, error) {
	charge, err := jobs.Step(ctx, "charge", func(ctx context.Context) (Charge, error) {
		ledger("charge", j)
		return Charge{ID: "ch_" + o.OrderID, AmountCents: o.AmountCents}, nil // the provider's answer
	})
	if err != nil {
		return nil, err
	}
	invoice, err := jobs.Step(ctx, "invoice", func(ctx context.Context) (string, error) {
		ledger("invoice", j)
		if os.Getenv("DURABLE_HOLD_INVOICE") == "1" {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return fmt.Sprintf("INV-%s-%d", o.OrderID, charge.AmountCents), nil
	})
	if err != nil {
		return nil, err
	}
	sent, err := jobs.Step(ctx, "email", func(ctx context.Context) (bool, error) {
		return o.Email != "", nil // the mailer's answer
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"charge": charge.ID, "invoice": invoice, "emailed": sent}, nil
}

// ledger appends "<what> <job id>" to DURABLE_LEDGER, when set.
func ledger(what string, j *jobs.Job) {
	name := os.Getenv("DURABLE_LEDGER")
	if name == "" {
		return
	}
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s %s\n", what, j.ID); err != nil {
		panic(err)
	}
}

// Refund is the refund job's payload.
type Refund struct {
	OrderID     string `json:"order_id"`
	AmountCents int    `json:"amount_cents"`
}

// Approval is the body of the "approval" signal.
type Approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// refund waits up to 48 hours for a person to approve it, holding no
// worker meanwhile, then refunds (once) or gives up.
func refund(ctx context.Context, _ *jobs.Job, r Refund) (any, error) {
	sig, err := jobs.WaitForSignal(ctx, "approval", 48*time.Hour)
	if err != nil {
		return nil, err // the job waits; it runs again when the signal comes
	}
	if sig.TimedOut {
		return map[string]any{"refunded": false, "reason": "not approved within 48 hours"}, nil
	}
	var a Approval
	if err := sig.Decode(&a); err != nil {
		return nil, jobs.Permanent(err)
	}
	if !a.Approved {
		return map[string]any{"refunded": false, "reason": "declined by " + a.By}, nil
	}
	id, err := jobs.Step(ctx, "refund", func(ctx context.Context) (string, error) {
		return "re_" + r.OrderID, nil // the payment provider's answer
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"refunded": true, "refund": id, "approved_by": a.By}, nil
}

// Reminder is the reminder job's payload.
type Reminder struct {
	OrderID      string `json:"order_id"`
	AfterSeconds int    `json:"after_seconds"`
}

// reminder sleeps (durably: no worker is held) and then reminds.
func reminder(ctx context.Context, _ *jobs.Job, r Reminder) (any, error) {
	if err := jobs.Sleep(ctx, "cool-off", time.Duration(max(r.AfterSeconds, 1))*time.Second); err != nil {
		return nil, err
	}
	return jobs.Step(ctx, "remind", func(ctx context.Context) (string, error) {
		return "reminded about " + r.OrderID, nil
	})
}

func main() {
	a := app.New()
	a.Handle("order", jobs.Typed(order))
	a.Handle("refund", jobs.Typed(refund))
	a.Handle("reminder", jobs.Typed(reminder))
	os.Exit(a.Main(os.Args[1:]))
}
