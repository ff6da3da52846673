// Package app is Flint as a library: the stock flint binary's commands,
// settings and roles, for a program of your own that registers job
// handlers of its own.
//
// The stock binary (main.go at the module's root) is this package with
// only the built-in job types:
//
//	func main() {
//		a := app.New()
//		os.Exit(a.Main(os.Args[1:]))
//	}
//
// A program of your own adds its handlers before Main and gets every
// subcommand (serve, api, worker, scheduler, migrate, users, bench...),
// flag and environment variable of the stock binary, the dashboard
// included:
//
//	type ResizeArgs struct {
//		URL   string `json:"url"`
//		Width int    `json:"width"`
//	}
//
//	func resize(ctx context.Context, job *jobs.Job, args ResizeArgs) (any, error) {
//		// ... the work; watch ctx, which ends on cancel, timeout or shutdown
//		return map[string]int{"width": args.Width}, nil
//	}
//
//	func main() {
//		a := app.New()
//		a.Handle("resize_image", jobs.Typed(resize))
//		os.Exit(a.Main(os.Args[1:]))
//	}
//
// A program that already has its own main and context runs the roles with
// LoadConfig and Run instead of Main:
//
//	cfg, err := app.LoadConfig("worker", nil, nil) // the environment's settings
//	if err != nil {
//		return err
//	}
//	return a.Run(ctx, cfg) // until ctx ends; then drains and returns nil
//
// and enqueues jobs from Go with a Client (NewClient), in its own
// transaction or in the caller's pgx transaction (EnqueueTx: the jobs
// exist only if that transaction commits).
//
// Where to go next: the runnable examples of this package register a
// handler (App.Handle), a typed one with its payload validated at
// enqueue, enqueue inside a transaction of one's own (Client.EnqueueTx)
// and start the roles from one's own main (App.Run); examples/invoices in
// the repository is a complete program, the stock binary plus one job
// type of its own. The jobs package documents handlers (jobs.Handler,
// jobs.Typed) and the job's states.
//
// Every process of a deployment that runs a job type must have its
// handler: worker pools claim only the types they have handlers for, so
// a stock `flint worker` beside your program never takes your jobs. The
// API accepts a type that is registered in its own process, served by a
// worker (in-process or remote) seen in the last 24 hours, or named in
// FLINT_JOB_TYPES.
package app
