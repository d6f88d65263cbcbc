package workloads

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/locktest/locktest/clusters/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/protocol"
)

// Process is one client process, seen from the controller.
type Process struct {
	ID         int
	Host       *netns.Host // its network namespace, or nil
	stderrPath string

	cmd     *exec.Cmd
	stdin   io.WriteCloser
	enc     *protocol.Encoder
	replies chan protocol.Reply
	exited  chan struct{}
	drained chan struct{} // closed when every line the client printed was read
	exitErr error
	badLine error // the first malformed line the client printed

	nextReq atomic.Int64
	killed  atomic.Bool // killed on purpose (crash-client, shutdown)
	paused  atomic.Bool
	// inFlight is the id of the request awaiting its answer, 0 when none.
	inFlight atomic.Int64
	// selfStops counts the client's notices that it stops itself.
	selfStops atomic.Int64
	grant     history.Event // the completion of the last successful acquire
	grantNo   int64         // the run's number of that grant (Runner.Grants), from 1
	ready     protocol.Ready
	resumed   atomic.Int64 // time.Now().UnixNano() of the last Resume
	mu        sync.Mutex
	// onStop is told when the client announces that it stops itself at a
	// fault point (protocol.Reply.Stopped), before it stops.
	onStop func(p *Process, point string, crash bool)
}

// ErrExited is returned by Do when the client process ended.
var ErrExited = errors.New("client process exited")

// ErrHung is returned by Do when the client did not answer in time.
var ErrHung = errors.New("client process did not answer")

// startProcess runs argv as client id, with stderr in stderrPath, and does
// the handshake.
func startProcess(argv []string, id int, stderrPath string, hello protocol.Hello, timeout time.Duration) (*Process, error) {
	errf, err := os.Create(stderrPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = errf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		errf.Close()
		return nil, err
	}
	// A pipe of our own rather than StdoutPipe: Wait must not close the
	// read end while replies are still being read.
	stdout, w, err := os.Pipe()
	if err != nil {
		errf.Close()
		return nil, err
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		errf.Close()
		stdout.Close()
		return nil, fmt.Errorf("start client %d (%s): %w", id, strings.Join(argv, " "), err)
	}
	p := &Process{
		ID: id, stderrPath: stderrPath, cmd: cmd, stdin: stdin,
		enc:     protocol.NewEncoder(stdin),
		replies: make(chan protocol.Reply, 1),
		exited:  make(chan struct{}),
		drained: make(chan struct{}),
	}
	dec := protocol.NewDecoder(stdout)
	readyc := make(chan error, 1)
	go func() {
		defer close(p.drained)
		defer stdout.Close()
		var ready protocol.Ready
		err := dec.Next(&ready)
		switch {
		case err != nil:
			readyc <- fmt.Errorf("no handshake: %w", err)
		case ready.Type != protocol.TypeReady:
			readyc <- fmt.Errorf("first line %q is not a ready message", dec.Last)
		case ready.Error != "":
			readyc <- errors.New(ready.Error)
		case ready.Version != protocol.Version:
			readyc <- fmt.Errorf("client speaks protocol version %d, controller %d", ready.Version, protocol.Version)
		default:
			p.mu.Lock()
			p.ready = ready
			p.mu.Unlock()
			readyc <- nil
		}
		if err != nil {
			return
		}
		for {
			var rep protocol.Reply
			if err := dec.Next(&rep); err != nil {
				if !errors.Is(err, io.EOF) {
					p.mu.Lock()
					p.badLine = err
					p.mu.Unlock()
					_ = cmd.Process.Kill()
				}
				return
			}
			if rep.Stopped != "" {
				p.selfStop(rep)
				continue
			}
			p.replies <- rep
		}
	}()
	go func() {
		err := cmd.Wait()
		errf.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.exited)
	}()
	if err := p.enc.Send(hello); err != nil {
		p.Kill()
		return nil, fmt.Errorf("client %d: send hello: %w; %s", id, err, p.stderrTail())
	}
	select {
	case err := <-readyc:
		if err != nil {
			p.Kill()
			return nil, fmt.Errorf("client %d failed to start: %w; %s", id, err, p.stderrTail())
		}
	case <-p.exited:
		return nil, fmt.Errorf("client %d exited at start (%v); %s", id, p.exitError(), p.stderrTail())
	case <-time.After(timeout):
		p.Kill()
		return nil, fmt.Errorf("client %d gave no handshake within %s; %s", id, timeout, p.stderrTail())
	}
	return p, nil
}

// Grant returns the completion event of the client's last successful
// acquire (owner, token, the servers that granted it).
func (p *Process) Grant() history.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grant
}

// GrantNo returns the run's number of the client's last successful
// acquire: 1 for the run's first grant (Runner.Grants counts them).
func (p *Process) GrantNo() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.grantNo
}

// Ready returns the client's handshake answer.
func (p *Process) Ready() protocol.Ready {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

// Probe starts argv once as client 0, reads its handshake and shuts it
// down: it tells what the client's lock promises, and that the program
// starts at all, before a run depends on it.
func Probe(argv []string, hello protocol.Hello, stderrPath string, timeout time.Duration) (protocol.Ready, error) {
	hello.Type, hello.Version, hello.Client = protocol.TypeHello, protocol.Version, 0
	p, err := startProcess(argv, 0, stderrPath, hello, timeout)
	if err != nil {
		return protocol.Ready{}, err
	}
	ready := p.Ready()
	p.Shutdown(2 * time.Second)
	return ready, nil
}

// PID returns the OS pid.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Do sends one request and waits for its reply, for at most timeout (the
// time the process spends stopped by a fault included).
func (p *Process) Do(op, owner string, timeout time.Duration, offsetMs ...int64) (protocol.Reply, error) {
	req := protocol.Request{Op: op, Owner: owner}
	if len(offsetMs) > 0 {
		req.OffsetMs = offsetMs[0]
	}
	return p.DoRequest(req, timeout)
}

// DoRequest is Do with the whole request given (its ID is set here).
func (p *Process) DoRequest(req protocol.Request, timeout time.Duration) (protocol.Reply, error) {
	id := p.nextReq.Add(1)
	req.ID = id
	p.inFlight.Store(id)
	defer p.inFlight.CompareAndSwap(id, 0)
	if err := p.enc.Send(req); err != nil {
		return protocol.Reply{}, p.deadError(err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case rep := <-p.replies:
			if rep.ID != id {
				return rep, fmt.Errorf("client %d answered request %d with the id %d", p.ID, id, rep.ID)
			}
			return rep, nil
		case <-p.exited:
			// A reply may have been read just before the exit.
			select {
			case rep := <-p.replies:
				if rep.ID == id {
					return rep, nil
				}
			default:
			}
			return protocol.Reply{}, p.deadError(nil)
		case <-t.C:
			if p.paused.Load() {
				// Frozen by a fault: the wait is the fault's, not a hang.
				t.Reset(timeout)
				continue
			}
			if since := time.Duration(time.Now().UnixNano() - p.resumed.Load()); since < timeout {
				// Resumed lately: it gets the whole timeout from then.
				t.Reset(timeout - since)
				continue
			}
			return protocol.Reply{}, fmt.Errorf("%w: client %d, %s for %s; %s", ErrHung, p.ID, req.Op, timeout, p.stderrTail())
		}
	}
}

// selfStop takes the client's notice that it stops itself at a fault
// point: from now on it is frozen by a fault (Do's hang detection waits)
// or crashed on purpose (the workload replaces it), as if the controller
// had stopped or killed it.
func (p *Process) selfStop(n protocol.Reply) {
	crash := n.Stop == protocol.StopCrash
	p.selfStops.Add(1)
	if crash {
		p.killed.Store(true)
	} else {
		p.paused.Store(true)
	}
	p.mu.Lock()
	f := p.onStop
	p.mu.Unlock()
	if f != nil {
		f(p, n.Stopped, crash)
	}
}

// WaitStopped returns once the process, stopped by itself at a fault
// point, is frozen (or gone), up to limit.
func (p *Process) WaitStopped(limit time.Duration) error {
	return proc.WaitStopped(p.PID(), limit)
}

// InFlight returns the id of the request awaiting its answer (0: none).
func (p *Process) InFlight() int64 { return p.inFlight.Load() }

// LastRequest returns the id of the last request sent (the next gets the
// one after).
func (p *Process) LastRequest() int64 { return p.nextReq.Load() }

// Points returns the fault points the client said it can stop at.
func (p *Process) Points() []protocol.Point {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready.Lock == nil {
		return nil
	}
	return p.ready.Lock.Points
}

func (p *Process) deadError(err error) error {
	select {
	case <-p.exited:
	case <-time.After(time.Second):
	}
	// The lines it printed before it ended (a notice that it crashes
	// itself on purpose) are read before its end is judged.
	select {
	case <-p.drained:
	case <-time.After(time.Second):
	}
	p.mu.Lock()
	bad := p.badLine
	p.mu.Unlock()
	if bad != nil {
		return fmt.Errorf("client %d printed garbage: %w; %s", p.ID, bad, p.stderrTail())
	}
	if err == nil {
		err = p.exitError()
	}
	return fmt.Errorf("%w: client %d (%v)", ErrExited, p.ID, err)
}

func (p *Process) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Killed reports whether the process was killed on purpose.
func (p *Process) Killed() bool { return p.killed.Load() }

// Kill sends SIGKILL (a crash) and waits for the process to end.
func (p *Process) Kill() {
	p.killed.Store(true)
	// The whole process group: a client program and whatever it started.
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	<-p.exited
}

// Pause freezes the process (SIGSTOP), as a stop-the-world GC does; with it
// its whole process group (a client program started by a wrapper).
func (p *Process) Pause() error {
	p.paused.Store(true)
	if err := proc.StopGroup(p.PID()); err != nil {
		p.paused.Store(false)
		return fmt.Errorf("pause client %d: %w", p.ID, err)
	}
	return nil
}

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() error {
	err := syscall.Kill(-p.PID(), syscall.SIGCONT)
	p.resumed.Store(time.Now().UnixNano())
	p.paused.Store(false)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("resume client %d: %w", p.ID, err)
	}
	return nil
}

// Shutdown asks the process to exit and kills it if it has not within grace.
func (p *Process) Shutdown(grace time.Duration) {
	_ = p.Resume()
	p.killed.Store(true)
	done := make(chan struct{})
	go func() {
		_, _ = p.Do(protocol.OpShutdown, "", grace)
		close(done)
	}()
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.exited
	}
	_ = p.stdin.Close()
	<-done
}

func (p *Process) stderrTail() string {
	b, err := os.ReadFile(p.stderrPath)
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return "its stderr was empty"
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return fmt.Sprintf("last stderr (%s): %s", p.stderrPath, s)
}
