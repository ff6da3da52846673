package jobs

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser accepts the standard five fields (minute hour day-of-month
// month day-of-week) and the descriptors @yearly, @monthly, @weekly, @daily
// and @hourly.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// CronSchedule is a parsed cron expression evaluated in a time zone.
//
// Daylight-saving policy, decided explicitly rather than inherited:
//   - Spring forward (a wall-clock time that does not exist that day): the
//     occurrence runs once, at the first instant after the gap (a 02:30 job
//     runs at 03:00 on the day clocks jump from 02:00 to 03:00). Skipping it,
//     as some cron libraries do, silently loses a run.
//   - Fall back (a wall-clock time that happens twice): the occurrence runs
//     once, at the first of the two instants.
//
// It works by finding the next matching wall-clock time with the parser's
// schedule evaluated in UTC (where no wall-clock time is missing or
// repeated), then mapping that wall-clock time to an instant in the zone.
type CronSchedule struct {
	expr     string
	sched    cron.Schedule
	location *time.Location
}

// ParseCron parses expr for the IANA time zone tz ("" means UTC).
func ParseCron(expr, tz string) (*CronSchedule, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, errors.New("is empty")
	}
	if len(expr) > 200 {
		return nil, errors.New("is longer than 200 characters")
	}
	upper := strings.ToUpper(expr)
	if strings.HasPrefix(upper, "TZ=") || strings.HasPrefix(upper, "CRON_TZ=") {
		return nil, errors.New("must not carry a time zone prefix; use the timezone field")
	}
	if strings.HasPrefix(expr, "@every") {
		return nil, errors.New("@every is not supported; use interval_seconds")
	}
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return nil, fmt.Errorf("unknown time zone %q (use an IANA name such as Europe/Berlin)", tz)
		}
		loc = l
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("is not a valid cron expression (minute hour day month weekday, or @daily etc.): %v", err)
	}
	cs := &CronSchedule{expr: expr, sched: s, location: loc}
	// Expressions that can never fire (February 30th) are refused now.
	if cs.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, errors.New("never fires")
	}
	return cs, nil
}

// Next returns the first firing instant strictly after t, or the zero time
// if there is none within the parser's search horizon.
func (c *CronSchedule) Next(t time.Time) time.Time {
	after := t
	wall := toWall(t.In(c.location))
	for range 1000 {
		nextWall := c.sched.Next(wall)
		if nextWall.IsZero() {
			return time.Time{}
		}
		inst := fromWall(nextWall, c.location)
		if inst.After(after) {
			return inst
		}
		// The wall-clock time maps to an instant not after t: the second
		// pass through a repeated hour, or a gap shifted back. Move on.
		wall = nextWall
	}
	return time.Time{}
}

// toWall returns the wall-clock reading of t as a UTC time.
func toWall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// fromWall maps a wall-clock reading (held in a UTC time) to the instant it
// denotes in loc: the first of two for a repeated reading, the end of the
// gap for a missing one.
func fromWall(w time.Time, loc *time.Location) time.Time {
	t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	if toWall(t).Equal(w) {
		// Exists. If it exists twice, take the earlier: an hour before, the
		// same reading may also be valid under the other offset.
		if earlier := t.Add(-time.Hour); toWall(earlier).Equal(w) {
			return earlier
		}
		return t
	}
	// In a gap: the first instant whose wall-clock reading is after w is the
	// moment the clocks jumped.
	lo, hi := t.Add(-3*time.Hour), t.Add(3*time.Hour)
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if toWall(mid.In(loc)).Before(w) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi.Truncate(time.Second)
}
