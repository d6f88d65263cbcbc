// Package runstate remembers, outside the run directory, what a running
// harness started (processes by pid and start time, files to remove), so
// that `locktest cleanup` can undo what a crashed run left behind without
// ever touching a process it did not start.
package runstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Dir is where state files live: $LOCKTEST_STATE_DIR, else
// locktest-runs in the temporary directory, with the user id appended for
// users other than root (each user cleans up after their own runs, and a
// directory root created does not lock the others out).
func Dir() string {
	if d := os.Getenv("LOCKTEST_STATE_DIR"); d != "" {
		return d
	}
	if uid := os.Getuid(); uid != 0 {
		return filepath.Join(os.TempDir(), "locktest-runs-"+strconv.Itoa(uid))
	}
	return filepath.Join(os.TempDir(), "locktest-runs")
}

// Proc is a process the run started.
type Proc struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // field 22 of /proc/PID/stat: tells a reused pid apart
	What      string `json:"what"`
}

// State is one run's record.
type State struct {
	RunID   string `json:"run_id"`
	HostPID int    `json:"harness_pid"`
	// HostStart is the harness process's start time (as Proc.StartTime):
	// the run is live while that very process runs, whatever its name
	// (a renamed binary, a test binary that runs the harness).
	HostStart uint64   `json:"harness_start_time,omitempty"`
	Started   string   `json:"started"`
	RunDir    string   `json:"run_dir"`
	Procs     []Proc   `json:"procs"`
	Paths     []string `json:"paths,omitempty"` // files or directories to remove
	// NetID prefixes the names of the run's network namespaces.
	NetID string `json:"net_id,omitempty"`
	// Docker: the run created containers and networks labelled
	// locktest.run=<RunID> on the Docker engine of DOCKER_HOST.
	Docker     bool   `json:"docker,omitempty"`
	DockerHost string `json:"docker_host,omitempty"`
	// Compose lists the containers of a compose stack the run faulted
	// (--cluster compose): cleanup thaws, restarts and un-partitions them.
	Compose []string `json:"compose,omitempty"`
}

// Tracker keeps a run's State on disk, rewriting it on every change.
type Tracker struct {
	mu   sync.Mutex
	path string
	st   State
}

// Open starts tracking run id.
func Open(runID, runDir string) (*Tracker, error) {
	if err := os.MkdirAll(Dir(), 0o700); err != nil {
		return nil, fmt.Errorf("run state: %w", err)
	}
	hostStart, _ := StartTime(os.Getpid())
	t := &Tracker{
		path: filepath.Join(Dir(), runID+".json"),
		st:   State{RunID: runID, HostPID: os.Getpid(), HostStart: hostStart, Started: time.Now().Format(time.RFC3339), RunDir: runDir},
	}
	return t, t.save()
}

// AddProc records a started process.
func (t *Tracker) AddProc(pid int, what string) {
	if t == nil {
		return
	}
	st, _ := StartTime(pid)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Procs = append(t.st.Procs, Proc{PID: pid, StartTime: st, What: what})
	_ = t.save()
}

// SetNet records the prefix of the run's network namespaces.
func (t *Tracker) SetNet(id string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.NetID = id
	_ = t.save()
}

// SetDocker records that the run creates Docker containers and networks
// (labelled with its run id) on the engine at host ("" for the default).
func (t *Tracker) SetDocker(host string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Docker, t.st.DockerHost = true, host
	_ = t.save()
}

// AddCompose records containers of a stack the run did not create but
// faults (they must be healed if the run crashes).
func (t *Tracker) AddCompose(ids ...string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Compose = append(t.st.Compose, ids...)
	_ = t.save()
}

// AddPath records a file or directory to remove if the run crashes.
func (t *Tracker) AddPath(path string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st.Paths = append(t.st.Paths, path)
	_ = t.save()
}

// RemoveProc forgets a process that has been stopped.
func (t *Tracker) RemoveProc(pid int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, p := range t.st.Procs {
		if p.PID == pid {
			t.st.Procs = append(t.st.Procs[:i], t.st.Procs[i+1:]...)
			break
		}
	}
	_ = t.save()
}

// Close removes the state file: the run cleaned up after itself.
func (t *Tracker) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := os.Remove(t.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (t *Tracker) save() error {
	b, err := json.MarshalIndent(t.st, "", "  ")
	if err != nil {
		return err
	}
	tmp := t.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, t.path)
}

// StartTime reads a process's start time (clock ticks since boot).
func StartTime(pid int) (uint64, error) {
	st, _, err := stat(pid)
	return st, err
}

// stat reads a process's start time and state letter (R, S, T, Z, ...).
func stat(pid int) (start uint64, state string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	s := string(b)
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, "", errors.New("bad /proc stat")
	}
	start, err = strconv.ParseUint(f[19], 10, 64) // field 22 overall
	return start, f[0], err
}

// Alive reports whether p is still the same live process (a zombie, dead
// but not yet reaped, is not).
func (p Proc) Alive() bool {
	st, state, err := stat(p.PID)
	return err == nil && state != "Z" && (p.StartTime == 0 || st == p.StartTime)
}

// Stale lists the state files of runs whose harness is gone.
func Stale() ([]State, error) {
	entries, err := os.ReadDir(Dir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []State
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(Dir(), e.Name()))
		if err != nil {
			continue
		}
		var st State
		if json.Unmarshal(b, &st) != nil {
			continue
		}
		if st.Live() {
			continue // that harness is still running
		}
		out = append(out, st)
	}
	return out, nil
}

// Live reports whether the harness that wrote st still runs: the process
// with its pid and start time (a state file from before start times were
// recorded: a live process of that pid named like locktest).
func (st State) Live() bool {
	if st.HostPID == 0 {
		return false
	}
	if st.HostStart != 0 {
		return Proc{PID: st.HostPID, StartTime: st.HostStart}.Alive()
	}
	return syscall.Kill(st.HostPID, 0) == nil && isLocktest(st.HostPID)
}

func isLocktest(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.Contains(string(b), "locktest")
}

// Clean kills the processes of a stale run that are still the ones it
// started (SIGCONT first, so a stopped one dies at once), removes its paths
// and its state file, and says what it did.
func Clean(st State) []string {
	var did []string
	for _, p := range st.Procs {
		if !p.Alive() {
			continue
		}
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
		_ = syscall.Kill(p.PID, syscall.SIGCONT)
		did = append(did, fmt.Sprintf("killed %s (pid %d)", p.What, p.PID))
	}
	for _, path := range st.Paths {
		if err := os.RemoveAll(path); err == nil {
			did = append(did, "removed "+path)
		}
	}
	_ = os.Remove(filepath.Join(Dir(), st.RunID+".json"))
	did = append(did, fmt.Sprintf("forgot run %s", st.RunID))
	return did
}
