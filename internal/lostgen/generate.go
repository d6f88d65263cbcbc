package lostgen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/locktest/locktest/history"
)

// Generate returns the events of the history cfg describes, in file order
// (Seq set), and its ground truth. It keeps every event in memory: use
// Write or WriteDir for long histories.
func Generate(cfg Config) ([]history.Event, Truth, error) {
	var evs []history.Event
	t, err := generate(cfg, func(e history.Event) error {
		e.Seq = int64(len(evs))
		evs = append(evs, e)
		return nil
	})
	if err != nil {
		return nil, Truth{}, err
	}
	return evs, t, nil
}

// GenerateHistory is Generate parsed into a history.History.
func GenerateHistory(cfg Config) (*history.History, Truth, error) {
	evs, t, err := Generate(cfg)
	if err != nil {
		return nil, Truth{}, err
	}
	h, err := history.FromEvents(evs)
	if err != nil {
		return nil, Truth{}, fmt.Errorf("parse generated history: %w", err)
	}
	return h, t, nil
}

// Write writes the history cfg describes to w, in the format of
// history.jsonl, through history's own Recorder, and returns its truth.
func Write(w io.Writer, cfg Config) (Truth, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	rec := history.NewRecorder(bw, 0, false)
	t, err := generate(cfg, func(e history.Event) error {
		rec.RecordAt(e, e.Time)
		return nil
	})
	if err != nil {
		return Truth{}, err
	}
	if err := rec.Err(); err != nil {
		return Truth{}, err
	}
	if err := bw.Flush(); err != nil {
		return Truth{}, fmt.Errorf("write history: %w", err)
	}
	return t, nil
}

// WriteDir makes dir a run directory that `locktest check DIR` reads: it
// writes dir/history.jsonl (which must not exist) and dir/truth.json (the
// ground truth, which locktest ignores).
func WriteDir(dir string, cfg Config) (Truth, error) {
	if err := cfg.Validate(); err != nil {
		return Truth{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Truth{}, fmt.Errorf("make run directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "history.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return Truth{}, fmt.Errorf("create history: %w", err)
	}
	t, err := Write(f, cfg)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close history: %w", cerr)
	}
	if err != nil {
		_ = os.Remove(f.Name()) // a partial history is no run
		return Truth{}, err
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return Truth{}, fmt.Errorf("encode truth: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "truth.json"), append(b, '\n'), 0o644); err != nil {
		return Truth{}, fmt.Errorf("write truth: %w", err)
	}
	return t, nil
}

// generate runs the simulation twice: once to learn how long the run
// lasts (the header, written first, states it), once to emit.
func generate(cfg Config, emit func(history.Event) error) (Truth, error) {
	if err := cfg.Validate(); err != nil {
		return Truth{}, err
	}
	cfg = cfg.withDefaults()
	dry := newGen(cfg, func(history.Event) error { return nil })
	end, err := dry.run()
	if err != nil {
		return Truth{}, err
	}
	if err := emit(history.Event{Type: history.Run, Info: runInfo(cfg, end)}); err != nil {
		return Truth{}, fmt.Errorf("emit header: %w", err)
	}
	g := newGen(cfg, emit)
	g.truth.Events = 1
	if _, err := g.run(); err != nil {
		return Truth{}, err
	}
	for i := range g.cl {
		g.now += 1000
		g.record(history.Event{Type: history.ClientExit, Client: i + 1, Detail: "shut down"})
	}
	g.now += 1000
	g.record(history.Event{Type: history.RunEnd, Detail: "time limit"})
	if g.err != nil {
		return Truth{}, g.err
	}
	return g.finish(), nil
}

func runInfo(cfg Config, end int64) *history.RunInfo {
	ttl := cfg.Lease.Milliseconds()
	if cfg.NoExpiry {
		ttl = 0
	}
	return &history.RunInfo{
		FormatVersion: history.FormatVersion,
		Lock:          cfg.Lock,
		Nemeses:       []string{"none"},
		Seed:          cfg.Seed,
		Clients:       cfg.Clients,
		TTLMillis:     ttl,
		Lease:         !cfg.NoExpiry,
		TimeLimitMs:   (end + int64(time.Millisecond) - 1) / int64(time.Millisecond),
		StartedAt:     "2026-01-01T00:00:00Z",
		Cluster:       "simulated",
		Topology:      "single",
		Version:       "lostgen",
		DeadlockMs:    cfg.DeadlockMs,
		Command:       fmt.Sprintf("lostgen -ops %d -clients %d -lost %v -double %d -mix %s -seed %d", cfg.Ops, cfg.Clients, cfg.Lost, cfg.Double, cfg.Mix, cfg.Seed),
		Extra: map[string]any{
			"generator":     "lostgen",
			"lost":          cfg.Lost,
			"op_timeout_ms": float64(cfg.OpTimeout.Milliseconds()), // float64, as JSON decodes it
			"resource":      cfg.Resource,
		},
	}
}
