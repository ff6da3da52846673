package jobs_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

func mustCron(t *testing.T, expr, tz string) *jobs.CronSchedule {
	t.Helper()
	c, err := jobs.ParseCron(expr, tz)
	require.NoError(t, err)
	return c
}

func TestCronParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, expr, tz string }{
		{"empty", "", ""},
		{"garbage", "every day", ""},
		{"six fields", "0 0 0 * * *", ""},
		{"out of range", "61 * * * *", ""},
		{"tz prefix", "CRON_TZ=UTC 0 * * * *", ""},
		{"every", "@every 1m", ""},
		{"bad zone", "0 * * * *", "Mars/Olympus"},
		{"never fires", "0 0 30 2 *", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := jobs.ParseCron(tc.expr, tc.tz)
			require.Error(t, err)
		})
	}
}

func TestCronNext(t *testing.T) {
	t.Parallel()
	c := mustCron(t, "*/15 * * * *", "")
	got := c.Next(time.Date(2026, 3, 1, 10, 7, 0, 0, time.UTC))
	require.Equal(t, time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC), got)
	require.Equal(t, time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC), c.Next(got), "strictly after")
	d := mustCron(t, "@daily", "Europe/Berlin")
	require.Equal(t, time.Date(2026, 6, 1, 22, 0, 0, 0, time.UTC), d.Next(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)).UTC())
}

// TestCronDaylightSavingGap: on the spring-forward day the 02:30 run
// happens once, at 03:00, the end of the gap; other days keep 02:30.
func TestCronDaylightSavingGap(t *testing.T) {
	t.Parallel()
	la, _ := time.LoadLocation("America/Los_Angeles")
	c := mustCron(t, "30 2 * * *", "America/Los_Angeles")
	// 2026-03-08: clocks jump from 02:00 PST to 03:00 PDT.
	before := time.Date(2026, 3, 7, 12, 0, 0, 0, la)
	first := c.Next(before)
	require.Equal(t, time.Date(2026, 3, 8, 3, 0, 0, 0, la), first.In(la), "shifted to the end of the gap, not skipped")
	second := c.Next(first)
	require.Equal(t, time.Date(2026, 3, 9, 2, 30, 0, 0, la), second.In(la))
	require.Equal(t, time.Date(2026, 3, 7, 2, 30, 0, 0, la), c.Next(time.Date(2026, 3, 6, 12, 0, 0, 0, la)).In(la))
}

// TestCronDaylightSavingOverlap: on the fall-back day the 01:30 run happens
// once, at the first 01:30 (PDT), not again an hour later (PST).
func TestCronDaylightSavingOverlap(t *testing.T) {
	t.Parallel()
	la, _ := time.LoadLocation("America/Los_Angeles")
	c := mustCron(t, "30 1 * * *", "America/Los_Angeles")
	// 2026-11-01: clocks fall back from 02:00 PDT to 01:00 PST.
	first := c.Next(time.Date(2026, 10, 31, 12, 0, 0, 0, la))
	_, offset := first.In(la).Zone()
	require.Equal(t, -7*3600, offset, "the first 01:30 is PDT")
	require.Equal(t, 1, first.In(la).Hour())
	second := c.Next(first)
	require.Equal(t, time.Date(2026, 11, 2, 1, 30, 0, 0, la), second.In(la), "no second run in the repeated hour")
	require.Equal(t, 25*time.Hour, second.Sub(first))

	// An hourly job runs at each distinct instant, 25 times that day.
	h := mustCron(t, "0 * * * *", "America/Los_Angeles")
	at := time.Date(2026, 10, 31, 23, 30, 0, 0, la)
	var runs []time.Time
	for {
		at = h.Next(at)
		if at.In(la).Day() != 1 {
			break
		}
		runs = append(runs, at)
	}
	// Wall-clock hours 0..23 once each: 24 runs; the repeated 01:00 runs once.
	require.Len(t, runs, 24)
	for i := 1; i < len(runs); i++ {
		require.True(t, runs[i].After(runs[i-1]))
	}
}
