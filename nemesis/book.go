package nemesis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/locktest/locktest/internal/sleep"
)

// book is a run's fault schedule as the run goes: in a drawn run the
// entries the faults drew, in the order they struck; in a replay the
// entries given, each taken by its fault when its trigger comes, in order,
// and marked fired when it struck. Every fault's strike goes through it
// (a strike), drawn or replayed: the recorded and the replayed path are
// one.
type book struct {
	mu      sync.Mutex
	replay  bool
	from    string
	seed    int64
	entries []Entry
	taken   []bool
	start   time.Time
}

// strike is the entry a fault acts on: idx is its place in the book.
type strike struct {
	idx int
	Entry
}

func newBook(env *Env) *book {
	b := &book{seed: env.Seed, start: time.Now()}
	if env.Replay != nil {
		b.replay, b.from = true, env.Replay.ReplayedFrom
		for _, e := range env.Replay.Faults {
			e.Fired, e.FaultID, e.FiredAt = false, 0, nil
			b.entries = append(b.entries, e)
		}
		b.taken = make([]bool, len(b.entries))
	}
	return b
}

// books returns the run's book, made on first use (when the faults
// begin).
func (env *Env) books() *book {
	env.bookOnce.Do(func() { env.book = newBook(env) })
	return env.book
}

// replaying reports whether the run replays a schedule.
func (env *Env) replaying() bool { return env.Replay != nil }

// elapsed is the time since the faults began, what an "at" trigger counts.
func (env *Env) elapsed() time.Duration { return time.Since(env.books().start) }

// triggerAt is the trigger of a fault struck now, at opportunity grant
// (the run's grants so far): after that grant, or, before the first
// grant, the time since the faults began.
func (env *Env) triggerAt(grant int64) Trigger {
	if grant > 0 {
		return afterGrant(grant)
	}
	return at(env.elapsed())
}

// drawn enters an entry the fault just drew (a drawn run).
func (env *Env) drawn(e Entry) strike {
	b := env.books()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries = append(b.entries, e)
	b.taken = append(b.taken, true)
	return strike{idx: len(b.entries) - 1, Entry: e}
}

// next returns the first entry of fault name not yet taken (a replay).
func (env *Env) next(name string) (strike, bool) {
	b := env.books()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, e := range b.entries {
		if !b.taken[i] && e.Nemesis == name {
			return strike{idx: i, Entry: e}, true
		}
	}
	return strike{}, false
}

// dueAt returns the next entry of fault name when its trigger has come at
// the opportunity now (grant: the run's grants so far, or this grant's
// number for a fault struck right after it), and takes it.
func (env *Env) dueAt(name string, grant int64) (strike, bool) {
	s, ok := env.next(name)
	if !ok || !env.came(s.Trigger, grant) {
		return strike{}, false
	}
	env.take(s, grant)
	return s, true
}

// came reports whether trigger t has come at opportunity grant (and now).
func (env *Env) came(t Trigger, grant int64) bool {
	if t.At != "" {
		d, _ := time.ParseDuration(t.At)
		return env.elapsed() >= d
	}
	return grant >= t.AfterGrant
}

// take marks s taken, at opportunity grant: it struck there when it
// records its fault (fault records it fired).
func (env *Env) take(s strike, grant int64) {
	b := env.books()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.taken[s.idx] = true
	if s.Trigger.AfterGrant != 0 && grant != s.Trigger.AfterGrant {
		b.entries[s.idx].FiredAt = &Trigger{AfterGrant: grant}
	}
	if s.Trigger.At != "" {
		t := at(env.elapsed())
		b.entries[s.idx].FiredAt = &t
	}
}

// skip gives up an entry that cannot strike (its fault point is never
// reached): it stays in the schedule, not fired, and a note says why.
func (env *Env) skip(s strike, why string) {
	env.books().mu.Lock()
	env.books().taken[s.idx] = true
	env.books().mu.Unlock()
	note(env, fmt.Sprintf("%s skipped its scheduled fault %d (%s): %s", s.Nemesis, s.idx+1, s.Trigger, why))
}

// fired marks s as struck, as history fault id.
func (env *Env) fired(s strike, id int64) {
	b := env.books()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries[s.idx].Fired, b.entries[s.idx].FaultID = true, id
}

// Schedule returns the run's schedule: drawn, every fault that struck; a
// replay, every entry given, each saying whether it fired.
func (env *Env) Schedule() Schedule {
	s := Schedule{Version: ScheduleVersion, Seed: env.Seed, Faults: []Entry{}}
	b := env.books() // (made now when the faults never began: nothing fired)
	b.mu.Lock()
	defer b.mu.Unlock()
	s.ReplayedFrom = b.from
	for _, e := range b.entries {
		if e.Params == nil {
			e.Params = map[string]string{}
		}
		s.Faults = append(s.Faults, e)
	}
	return s
}

// awaitTrigger waits, in a replay, for the trigger of s: until its time,
// or right after the grant it names (right after the next grant when the
// run is past it). It returns the opportunity's grant number, ok false
// when the run ended first.
func (env *Env) awaitTrigger(ctx context.Context, s strike, grants chan struct{}) (int64, bool) {
	if s.Trigger.At != "" {
		d, _ := time.ParseDuration(s.Trigger.At)
		if !sleep.For(ctx, d-env.elapsed()) {
			return 0, false
		}
		return env.Workload.Grants(), true
	}
	if env.Workload.Grants() >= s.Trigger.AfterGrant {
		waitForGrant(ctx, env, grants, 2*env.TTL)
		return env.Workload.Grants(), ctx.Err() == nil
	}
	for env.Workload.Grants() < s.Trigger.AfterGrant {
		select {
		case <-grants:
		case <-ctx.Done():
			return 0, false
		}
	}
	return env.Workload.Grants(), true
}
