package domain

import (
	"math"
	"math/rand/v2"
	"time"
)

// BackoffBase is the base of the exponential retry delay.
const BackoffBase = 5 * time.Second

// MaxBackoff caps the delay so that a job with many retries still comes back
// within a day instead of overflowing.
const MaxBackoff = 24 * time.Hour

// Backoff returns how long to wait before retrying a job whose attempt-th
// attempt (1-based) just failed: base^(attempt-1) seconds, multiplied by a
// jitter factor drawn uniformly from [0.5, 1.5) so that a fleet of jobs
// failing together does not retry together. jitter returns a value in [0, 1);
// nil means math/rand.
//
//	attempt 1: 0.5 s – 1.5 s
//	attempt 2: 2.5 s – 7.5 s
//	attempt 3: 12.5 s – 37.5 s
func Backoff(attempt int, jitter func() float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if jitter == nil {
		jitter = rand.Float64
	}
	base := math.Pow(BackoffBase.Seconds(), float64(attempt-1))
	d := time.Duration(base * (0.5 + jitter()) * float64(time.Second))
	if d > MaxBackoff || d < 0 || math.IsInf(base, 0) {
		// Jitter the cap too, so capped retries do not synchronise either.
		d = time.Duration(float64(MaxBackoff) * (0.5 + jitter()/2))
	}
	return d
}
