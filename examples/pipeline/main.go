// Command pipeline is Flint with job types that pass data along a
// workflow: "fetch" → "resize" (resize reads what fetch returned), a fan
// out ("extract" adds one "square" per number it finds, and a "total"
// that adds up their results), and "report", a batch's callback that
// reads the batch's counts. It has every subcommand, flag and setting of
// the stock flint binary (go run . serve).
package main

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/flinthq/flint/app"
	"github.com/flinthq/flint/jobs"
)

// Image is fetch's payload and result: an image by name.
type Image struct {
	Name  string `json:"name"`
	Width int    `json:"width"`
	// Checksum is set by fetch: it stands for the bytes it downloaded.
	Checksum uint32 `json:"checksum,omitempty"`
}

// Validate implements jobs.ArgsValidator.
func (i Image) Validate() error {
	if i.Name == "" || i.Width < 1 {
		return errors.New("name is required and width must be at least 1")
	}
	return nil
}

// fetch stands for a download: it returns the image it "fetched".
func fetch(_ context.Context, _ *jobs.Job, img Image) (any, error) {
	img.Checksum = crc32.ChecksumIEEE([]byte(img.Name))
	return img, nil
}

// Thumb is resize's result.
type Thumb struct {
	Name     string `json:"name"`
	Width    int    `json:"width"`
	Checksum uint32 `json:"checksum"`
}

// resize reads the result of the job it depends on, by its step key.
func resize(ctx context.Context, _ *jobs.Job, _ struct{}) (any, error) {
	img, err := jobs.ParentResult[Image](ctx, "fetch")
	if err != nil {
		return nil, err
	}
	return Thumb{Name: "thumb-" + img.Name, Width: min(img.Width, 128), Checksum: img.Checksum}, nil
}

// Numbers is extract's payload.
type Numbers struct {
	Numbers []int `json:"numbers"`
}

// Validate implements jobs.ArgsValidator.
func (n Numbers) Validate() error {
	if len(n.Numbers) == 0 || len(n.Numbers) > jobs.MaxSpawnJobs-1 {
		return fmt.Errorf("numbers must hold 1 to %d numbers", jobs.MaxSpawnJobs-1)
	}
	return nil
}

// extract fans out: one square per number, then a total over all of
// them. They are created with extract's completion, and only then.
func extract(ctx context.Context, _ *jobs.Job, in Numbers) (any, error) {
	total := jobs.SpawnJob{Key: "total", Type: "total"}
	specs := make([]jobs.SpawnJob, 0, len(in.Numbers)+1)
	for i, n := range in.Numbers {
		key := fmt.Sprintf("square-%d", i)
		specs = append(specs, jobs.SpawnJob{Key: key, Type: "square", Payload: Square{N: n}, DependsOn: []string{jobs.Self}})
		total.DependsOn = append(total.DependsOn, key)
	}
	if err := jobs.Spawn(ctx, append(specs, total)...); err != nil {
		return nil, err
	}
	return map[string]int{"squares": len(in.Numbers)}, nil
}

// Square is square's payload.
type Square struct {
	N int `json:"n"`
}

func square(_ context.Context, _ *jobs.Job, s Square) (any, error) { return s.N * s.N, nil }

// total adds up the results of every job it waits for.
func total(ctx context.Context, _ *jobs.Job, _ struct{}) (any, error) {
	sum := 0
	for _, key := range jobs.ParentsOf(ctx).Keys() {
		n, err := jobs.ParentResult[int](ctx, key)
		if err != nil {
			return nil, err
		}
		sum += n
	}
	return map[string]int{"sum": sum}, nil
}

// report is a batch's on_success callback: it reads the batch it was
// enqueued for.
func report(ctx context.Context, _ *jobs.Job, _ struct{}) (any, error) {
	b, ok := jobs.BatchOf(ctx)
	if !ok {
		return nil, errors.New("report runs as a batch's callback")
	}
	return map[string]any{"batch": b.ID, "members": b.Total, "completed": b.Counts["completed"]}, nil
}

func main() {
	a := app.New()
	a.Handle("fetch", jobs.Typed(fetch))
	a.Handle("resize", jobs.Typed(resize))
	a.Handle("extract", jobs.Typed(extract))
	a.Handle("square", jobs.Typed(square))
	a.Handle("total", jobs.Typed(total))
	a.Handle("report", jobs.Typed(report))
	os.Exit(a.Main(os.Args[1:]))
}
