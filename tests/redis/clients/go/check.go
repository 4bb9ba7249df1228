package main

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// failure is what a failed check panics with; run turns it into the case's error.
type failure string

func (f failure) Error() string { return string(f) }

func failf(format string, a ...interface{}) {
	panic(failure(fmt.Sprintf(format, a...)))
}

// ok fails the case if the command returned an error, and returns the command so that
// its value can be read: ok(rdb.Get(ctx, k)).Val().
func ok[C redis.Cmder](c C) C {
	if err := c.Err(); err != nil {
		failf("%s: unexpected error: %v", showArgs(c.Args()), err)
	}
	return c
}

// nilReply checks that the command's reply was nil (redis.Nil).
func nilReply(c redis.Cmder) {
	if err := c.Err(); !errors.Is(err, redis.Nil) {
		failf("%s: want redis.Nil, got error %v (value %s)", showArgs(c.Args()), err, c.String())
	}
}

// errPrefix checks that the command failed with a server error starting with prefix.
func errPrefix(c redis.Cmder, prefix string) {
	err := c.Err()
	if err == nil {
		failf("%s: want error %q..., got no error (%s)", showArgs(c.Args()), prefix, c.String())
	}
	if !strings.HasPrefix(err.Error(), prefix) {
		failf("%s: want error starting with %q, got %q", showArgs(c.Args()), prefix, err.Error())
	}
}

// eq compares with reflect.DeepEqual, so the types must match too.
func eq(what string, got, want interface{}) {
	if !reflect.DeepEqual(got, want) {
		failf("%s: got %#v, want %#v", what, got, want)
	}
}

func isTrue(what string, cond bool, got interface{}) {
	if !cond {
		failf("%s: got %#v", what, got)
	}
}

// between checks lo <= d <= hi for TTLs.
func between(what string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		failf("%s: got %v, want between %v and %v", what, d, lo, hi)
	}
}

// sorted returns a sorted copy.
func sorted(s []string) []string {
	c := append([]string{}, s...)
	sort.Strings(c)
	return c
}

// sameSet compares two lists of strings as sets, reporting what differs. Duplicates in
// got are allowed (SCAN may return a key more than once).
func sameSet(what string, got, want []string) {
	g := map[string]int{}
	for _, s := range got {
		g[s]++
	}
	w := map[string]bool{}
	for _, s := range want {
		w[s] = true
	}
	var missing, extra []string
	for s := range w {
		if g[s] == 0 {
			missing = append(missing, s)
		}
	}
	for s := range g {
		if !w[s] {
			extra = append(extra, s)
		}
	}
	if len(missing)+len(extra) > 0 {
		failf("%s: %d distinct collected, %d expected; missing %s; unexpected %s",
			what, len(g), len(w), head(missing), head(extra))
	}
}

func head(s []string) string {
	sort.Strings(s)
	if len(s) > 5 {
		return fmt.Sprintf("%q... (%d)", s[:5], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func showArgs(args []interface{}) string {
	parts := make([]string, len(args))
	for i, a := range args {
		s := fmt.Sprint(a)
		if b, isBytes := a.([]byte); isBytes {
			s = fmt.Sprintf("%q", b)
		}
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		parts[i] = s
	}
	return strings.Join(parts, " ")
}
