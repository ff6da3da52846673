package handlers

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/views"
)

func (s *server) benchmarkPage(c *fiber.Ctx) error {
	return render(c, http.StatusOK, views.BenchmarkPageView(s.chrome(c, "Benchmark", "benchmark", false),
		views.BenchmarkPage{N: "10000", Algorithm: "both"}))
}

// runBenchmarkHTML runs the benchmark from the dashboard, capped at 200,000
// entries so a click cannot tie up the server for minutes.
func (s *server) runBenchmarkHTML(c *fiber.Ctx) error {
	b := views.BenchmarkPage{N: strings.TrimSpace(c.FormValue("n")), Algorithm: c.FormValue("algorithm")}
	n, err := strconv.Atoi(b.N)
	switch {
	case err != nil || n < 1000 || n > 200_000:
		b.Error = "Enter a whole number from 1,000 to 200,000."
	case !slices.Contains(views.BenchAlgorithms, b.Algorithm):
		b.Error = "Choose heap, timing_wheel or both."
	case s.bench == nil:
		b.Error = "The benchmark is not available in this process."
	}
	if b.Error != "" {
		return render(c, http.StatusUnprocessableEntity, views.BenchmarkPartial(b))
	}
	start := time.Now()
	res, err := s.bench(c.UserContext(), n, b.Algorithm)
	if err != nil {
		return err
	}
	b.Ran, b.Elapsed, b.Results = true, time.Since(start), res
	return render(c, http.StatusOK, views.BenchmarkPartial(b))
}

// benchmarkRequest is the body of POST /api/v1/benchmark/run.
type benchmarkRequest struct {
	N         *int   `json:"n"`
	Algorithm string `json:"algorithm"`
}

// runBenchmarkAPI handles POST /api/v1/benchmark/run.
func (s *server) runBenchmarkAPI(c *fiber.Ctx) error {
	var req benchmarkRequest
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	n := 10000
	if req.N != nil {
		n = *req.N
	}
	if n < 1 || n > 1_000_000 {
		return invalid("n", "must be between 1 and 1000000")
	}
	if req.Algorithm == "" {
		req.Algorithm = "both"
	}
	if !slices.Contains(views.BenchAlgorithms, req.Algorithm) {
		return invalid("algorithm", "must be heap, timing_wheel or both")
	}
	if s.bench == nil {
		return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the benchmark is not available in this process"}
	}
	start := time.Now()
	res, err := s.bench(c.UserContext(), n, req.Algorithm)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"n": n, "algorithm": req.Algorithm, "elapsed_ms": time.Since(start).Milliseconds(), "results": res})
}
