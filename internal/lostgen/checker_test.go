package lostgen

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// TestCheckerAgrees runs the checker on small generated histories (1k
// operations) and holds it to the ground truth: a valid history (or one
// whose injections are all explainable) fails no property; a certain
// double grant makes linearizable fail.
func TestCheckerAgrees(t *testing.T) {
	type shape struct {
		name string
		cfg  Config
	}
	var shapes []shape
	for seed := int64(1); seed <= 4; seed++ {
		shapes = append(shapes,
			shape{"valid 50 clients 1%", Config{Ops: 1000, Clients: 50, Lost: 0.01, Seed: seed}},
			shape{"valid 50 clients 5%", Config{Ops: 1000, Clients: 50, Lost: 0.05, Seed: seed}},
			shape{"valid 10 clients 5% resource", Config{Ops: 1000, Clients: 10, Lost: 0.05, Resource: true, Seed: seed}},
			shape{"valid 5 clients 5% no expiry", Config{Ops: 1000, Clients: 5, Lost: 0.05, NoExpiry: true, Seed: seed}},
			shape{"certain 50 clients 2%", Config{Ops: 1000, Clients: 50, Lost: 0.02, Double: 3, Mix: MixCertain, Seed: seed}},
			shape{"certain 50 clients 5%", Config{Ops: 1000, Clients: 50, Lost: 0.05, Double: 3, Mix: MixCertain, Seed: seed}},
			shape{"certain 10 clients 5% resource", Config{Ops: 1000, Clients: 10, Lost: 0.05, Double: 2, Mix: MixCertain, Resource: true, Seed: seed}},
			shape{"explainable 5 clients 5%", Config{Ops: 2000, Clients: 5, Lost: 0.05, Double: 3, Mix: MixExplainable, Seed: seed}},
		)
	}
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("%s seed %d", sh.name, sh.cfg.Seed), func(t *testing.T) {
			h, tr, err := GenerateHistory(sh.cfg)
			require.NoError(t, err)
			agree(t, h, tr, sh.cfg)
		})
	}
}

// agree holds checker.Check to the truth of h: no property fails on a
// linearizable history (but deadlock on a lock without expiry, which a
// lost answer may hold for good) and linearizable is decided; a certain
// double grant makes linearizable fail.
func agree(t *testing.T, h *history.History, tr Truth, cfg Config) checker.Result {
	t.Helper()
	r := checker.Check(h, checker.Options{})
	agreed(t, r, tr, cfg)
	return r
}

// agreed is agree on the checker's result r.
func agreed(t *testing.T, r checker.Result, tr Truth, cfg Config) {
	t.Helper()
	var lin *checker.Property
	for i, p := range r.Properties {
		if p.Name == "linearizable" {
			lin = &r.Properties[i]
		}
	}
	require.NotNil(t, lin, "no linearizable property")
	switch tr.Linearizable {
	case Yes:
		for _, p := range r.Properties {
			if (cfg.NoExpiry || cfg.DeafClient > 0) && p.Name == "deadlock" {
				continue // see deafAgrees
			}
			require.NotEqual(t, checker.Fail, p.Status, "%s failed on a linearizable history (%s): %s", p.Name, tr.Why, p.Detail)
		}
		require.NotEqual(t, checker.Unknown, lin.Status, "linearizable unknown: %s", lin.Detail)
	case No:
		require.Equal(t, checker.Fail, lin.Status, "a certain double grant (%s) not found: %s", tr.Why, lin.Detail)
	default:
		t.Fatalf("the generator proved nothing: %s", tr.Why)
	}
}

// deafAgrees holds the checker to issue 17's liveness case: the lock was
// unavailable for tr.Unavailable, every answered refusal in it explained
// by a lost acquire that took effect. That is unavailability caused by
// lost answers, which must not make the run unsafe by itself. The checker
// fails it today (a deadlock violation, verdict unsafe): the test is
// skipped then, naming the disagreement, until the checker's liveness
// work lands.
func deafAgrees(t *testing.T, r checker.Result, tr Truth) {
	t.Helper()
	u := tr.Unavailable
	require.Greater(t, u.RefusedUnderLost, 10*u.RefusedUnderKnown)
	require.Positive(t, u.LostGrants)
	if r.Verdict == checker.Unsafe {
		t.Skipf("DISAGREEMENT (issue 17, liveness): checker says %s (%q) where the lock was unavailable %.2f s, %d answered refusals under %d lost acquires that took effect (and %d under the holder that opened the stretch): unavailability explained by lost answers, not a broken promise",
			r.Verdict, r.Why, float64(u.To-u.From)/1e9, u.RefusedUnderLost, u.LostGrants, u.RefusedUnderKnown)
	}
}

// TestCheckerLarge holds the checker to the truth on issue 17's sizes
// (10k-100k operations, 50 clients, 1-5% lost, with and without certain
// double grants), each within a minute. It is long: it runs only with
// LOSTGEN_LARGE=1 (LOSTGEN_LARGE=100k adds the 100k-operation ones),
// over LOSTGEN_SEEDS seeds (default 3); -run 'TestCheckerLarge/10k_valid'
// picks shapes.
// checker.Check takes no context yet: a history it cannot decide in time
// fails the test and its search goes on until the test binary exits.
func TestCheckerLarge(t *testing.T) {
	large := os.Getenv("LOSTGEN_LARGE")
	if large == "" {
		t.Skip("set LOSTGEN_LARGE=1 (or 100k) to run issue 17's sizes")
	}
	type shape struct {
		name string
		cfg  Config
	}
	var shapes []shape
	seeds := int64(3)
	if n, err := strconv.ParseInt(os.Getenv("LOSTGEN_SEEDS"), 10, 64); err == nil && n > 0 {
		seeds = n
	}
	for seed := int64(1); seed <= seeds; seed++ {
		shapes = append(shapes,
			shape{"10k valid 1%", Config{Ops: 10_000, Clients: 50, Lost: 0.01, Seed: seed}},
			shape{"10k valid 5%", Config{Ops: 10_000, Clients: 50, Lost: 0.05, Seed: seed}},
			shape{"10k certain 1%", Config{Ops: 10_000, Clients: 50, Lost: 0.01, Double: 5, Mix: MixCertain, Seed: seed}},
			shape{"10k certain 5%", Config{Ops: 10_000, Clients: 50, Lost: 0.05, Double: 5, Mix: MixCertain, Seed: seed}},
			shape{"10k explainable 5 clients 5%", Config{Ops: 10_000, Clients: 5, Lost: 0.05, Double: 5, Mix: MixExplainable, Seed: seed}},
		)
		if large == "100k" {
			shapes = append(shapes,
				shape{"100k valid 1%", Config{Ops: 100_000, Clients: 50, Lost: 0.01, Seed: seed}},
				shape{"100k certain 1%", Config{Ops: 100_000, Clients: 50, Lost: 0.01, Double: 5, Mix: MixCertain, Seed: seed}},
			)
		}
	}
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("%s seed %d", sh.name, sh.cfg.Seed), func(t *testing.T) {
			h, tr, err := GenerateHistory(sh.cfg)
			require.NoError(t, err)
			done := make(chan checker.Result, 1)
			go func() { done <- checker.Check(h, checker.Options{}) }()
			select {
			case r := <-done:
				agreed(t, r, tr, sh.cfg)
			case <-time.After(time.Minute):
				t.Fatalf("no verdict in a minute (truth: linearizable %s, %s)", tr.Linearizable, tr.Why)
			}
		})
	}
}
