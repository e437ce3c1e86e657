package events

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// ParseSince reads where a replay starts (Filter.Since): a duration back
// from now (Go's units, and d for days, w for weeks: 1d, 2w, 1d12h), an
// RFC 3339 time, or a local "2006-01-02 15:04:05" (or just the date).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if d, err := ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: want a duration back from now, like 10m or 1d", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{time.DateTime, "2006-01-02T15:04:05", time.DateOnly} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want a duration back from now (10m, 2h, 1d, 2w), an RFC 3339 time, or \"2006-01-02 15:04:05\"", s)
}

// leadingDaysWeeks is the weeks and days that may lead a duration: "2w", "1d12h".
var leadingDaysWeeks = regexp.MustCompile(`^(?:(\d+)w)?(?:(\d+)d)?`)

// ParseDuration is time.ParseDuration that also takes weeks and days (of 7 and
// 24 hours) before the other units.
func ParseDuration(s string) (time.Duration, error) {
	m := leadingDaysWeeks.FindStringSubmatch(s)
	if m[0] == "" {
		return time.ParseDuration(s)
	}
	var d time.Duration
	for i, unit := range []time.Duration{7 * 24 * time.Hour, 24 * time.Hour} {
		if m[i+1] != "" {
			n, err := strconv.Atoi(m[i+1])
			if err != nil {
				return 0, err
			}
			d += time.Duration(n) * unit
		}
	}
	if rest := s[len(m[0]):]; rest != "" {
		r, err := time.ParseDuration(rest)
		if err != nil {
			return 0, err
		}
		d += r
	}
	return d, nil
}
