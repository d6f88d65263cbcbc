// Package conformance exercises a client program against a real server,
// with no fault, and reports every way it breaks the pipe protocol
// (docs/protocol.md): malformed replies, missing fields, replies to the wrong
// request, wrong outcomes for a lock, hangs past a deadline. A user gets an
// adapter right here before trusting a verdict computed from it.
package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/protocol"
)

// Finding is one line of the report.
type Finding struct {
	OK     bool
	Step   string
	Detail string
}

// Report is the whole result.
type Report struct {
	Findings   []Finding
	Violations int
}

func (r *Report) add(ok bool, step, format string, a ...any) {
	r.Findings = append(r.Findings, Finding{OK: ok, Step: step, Detail: fmt.Sprintf(format, a...)})
	if !ok {
		r.Violations++
	}
}

// client is one running client program, seen line by line.
type client struct {
	id     int
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	exited chan struct{}
	next   int64
	ready  protocol.Ready
}

func start(argv []string, id int, hello protocol.Hello, stderr io.Writer) (*client, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		out.Close()
		return nil, err
	}
	c := &client{id: id, cmd: cmd, in: in, lines: make(chan string, 16), exited: make(chan struct{})}
	go func() {
		defer out.Close()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	go func() { _ = cmd.Wait(); close(c.exited) }()
	hello.Type, hello.Version, hello.Client = protocol.TypeHello, protocol.Version, id
	b, _ := json.Marshal(hello)
	// A program that died at once makes this write fail (broken pipe):
	// the handshake then reports the exit, with the program's stderr.
	_, _ = c.in.Write(append(b, '\n'))
	return c, nil
}

// line waits for the next line for at most d.
func (c *client) line(d time.Duration) (string, bool) {
	select {
	case l, ok := <-c.lines:
		return l, ok
	case <-time.After(d):
		return "", false
	}
}

// kill ends the program and everything it started (its process group).
func (c *client) kill() {
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.exited
}

// Run checks the client program argv against servers. stderr receives what
// the program prints on its stderr.
func Run(argv []string, hello protocol.Hello, deadline time.Duration, stderr io.Writer) *Report {
	r := &Report{}
	a, err := start(argv, 1, hello, stderr)
	if err != nil {
		r.add(false, "start", "cannot start %q: %v", strings.Join(argv, " "), err)
		return r
	}
	defer a.kill()
	if !handshake(r, a, deadline) {
		return r
	}
	b, err := start(argv, 2, hello, stderr)
	if err != nil {
		r.add(false, "start", "cannot start a second client: %v", err)
		return r
	}
	defer b.kill()
	if !handshake(r, b, deadline) {
		return r
	}
	fencing := a.ready.Lock != nil && a.ready.Lock.Fencing

	la, ok := expect(r, a, protocol.Request{Op: protocol.OpAcquire}, deadline, "ok", "")
	if !ok {
		return r
	}
	if la.Owner == "" {
		r.add(false, "acquire by client 1", "an ok acquire must carry the lease's owner id (\"owner\")")
	}
	if fencing && la.Token == nil {
		r.add(false, "acquire by client 1", "the ready message says fencing: true, but the ok acquire has no \"token\"")
	}
	// contended is as right as held: a queue recipe (ZooKeeper's) cannot
	// tell a holder from a trier ahead of it that is about to give up.
	expect(r, b, protocol.Request{Op: protocol.OpAcquire}, deadline, "fail", "held|contended")
	expect(r, a, protocol.Request{Op: protocol.OpRead}, deadline, "ok", "")
	expect(r, a, protocol.Request{Op: protocol.OpWrite}, deadline, "ok", "")
	expect(r, a, protocol.Request{Op: protocol.OpRelease, Owner: la.Owner}, deadline, "ok", "")
	lb, ok := expect(r, b, protocol.Request{Op: protocol.OpAcquire}, deadline, "ok", "")
	if ok && fencing && la.Token != nil && lb.Token != nil && *lb.Token <= *la.Token {
		r.add(false, "acquire by client 2", "fencing token %d does not grow past the previous grant's %d", *lb.Token, *la.Token)
	}
	if ok && lb.Owner != "" && lb.Owner == la.Owner {
		r.add(false, "acquire by client 2", "owner id %q was already used: owner ids must be unique per acquire", lb.Owner)
	}
	expect(r, b, protocol.Request{Op: protocol.OpRelease, Owner: lb.Owner}, deadline, "ok", "")
	expect(r, a, protocol.Request{Op: "no-such-op"}, deadline, "fail", "")
	checkPoints(r, a, deadline)
	for _, c := range []*client{a, b} {
		expect(r, c, protocol.Request{Op: protocol.OpShutdown}, deadline, "ok", "")
		select {
		case <-c.exited:
			r.add(true, fmt.Sprintf("shutdown of client %d", c.id), "exited")
		case <-time.After(deadline):
			r.add(false, fmt.Sprintf("shutdown of client %d", c.id), "still running %s after shutdown", deadline)
		}
	}
	return r
}

func handshake(r *Report, c *client, d time.Duration) bool {
	step := fmt.Sprintf("handshake of client %d", c.id)
	line, ok := c.line(d)
	if !ok {
		select {
		case <-c.exited:
			r.add(false, step, "the program exited before its ready message (see its stderr above)")
			return false
		case <-time.After(time.Second):
		}
		select {
		case <-c.exited:
			r.add(false, step, "the program exited before its ready message (see its stderr above)")
		default:
			r.add(false, step, "no ready message within %s", d)
		}
		return false
	}
	var ready protocol.Ready
	if err := strictDecode(line, &ready); err != nil {
		r.add(false, step, "malformed ready message %q: %v", clip(line), err)
		return false
	}
	var problems []string
	if ready.Type != protocol.TypeReady {
		problems = append(problems, fmt.Sprintf("type is %q, want \"ready\"", ready.Type))
	}
	if ready.Version != protocol.Version {
		problems = append(problems, fmt.Sprintf("version is %d, want %d", ready.Version, protocol.Version))
	}
	if ready.Error != "" {
		problems = append(problems, "it reports an error: "+ready.Error)
	}
	if ready.PID != c.cmd.Process.Pid {
		problems = append(problems, fmt.Sprintf("pid is %d but the process locktest started is %d: pauses would freeze the wrong process (use exec in a wrapper script)", ready.PID, c.cmd.Process.Pid))
	}
	if len(problems) > 0 {
		r.add(false, step, "%s", strings.Join(problems, "; "))
		return ready.Error == ""
	}
	c.ready = ready
	desc := "no lock description (a lease lock without fencing is assumed)"
	if l := ready.Lock; l != nil {
		desc = fmt.Sprintf("%s: lease %v, fencing %v, reentrant %v", l.Name, l.Lease, l.Fencing, l.Reentrant)
	}
	r.add(true, step, "%s", desc)
	return true
}

// expect sends req and checks the reply's form and outcome.
func expect(r *Report, c *client, req protocol.Request, d time.Duration, outcome, reason string) (protocol.Reply, bool) {
	step := fmt.Sprintf("%s by client %d", req.Op, c.id)
	req, ok := send(r, c, req, step)
	if !ok {
		return protocol.Reply{}, false
	}
	line, ok := c.line(d)
	if !ok {
		r.add(false, step, "no reply within %s", d)
		return protocol.Reply{}, false
	}
	return checkReply(r, step, req, line, outcome, reason)
}

// send numbers req and writes it to c; a write that fails is a finding of
// step.
func send(r *Report, c *client, req protocol.Request, step string) (protocol.Request, bool) {
	c.next++
	req.ID = c.next
	b, _ := json.Marshal(req)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		r.add(false, step, "cannot send the request: %v", err)
		return req, false
	}
	return req, true
}

// checkReply checks the form and outcome of line, the answer to req.
func checkReply(r *Report, step string, req protocol.Request, line, outcome, reason string) (protocol.Reply, bool) {
	var rep protocol.Reply
	if err := strictDecode(line, &rep); err != nil {
		r.add(false, step, "malformed reply %q: %v", clip(line), err)
		return rep, false
	}
	var problems []string
	if rep.ID != req.ID {
		problems = append(problems, fmt.Sprintf("reply id %d answers request %d", rep.ID, req.ID))
	}
	switch rep.Outcome {
	case "ok", "fail", "info":
	default:
		problems = append(problems, fmt.Sprintf("outcome %q is not ok, fail or info", rep.Outcome))
	}
	if rep.Outcome == "fail" && rep.Reason == "" {
		problems = append(problems, "a fail must say why (\"reason\": held, contended, not-owner, not-held or error)")
	}
	// reason lists the right reasons, separated by |.
	if rep.Outcome != outcome || (reason != "" && !slices.Contains(strings.Split(reason, "|"), rep.Reason)) {
		want := outcome
		if reason != "" {
			want += "/" + strings.ReplaceAll(reason, "|", " or "+outcome+"/")
		}
		got := rep.Outcome
		if rep.Reason != "" {
			got += "/" + rep.Reason
		}
		problems = append(problems, fmt.Sprintf("answered %s, a correct lock answers %s here", got, want))
	}
	if len(problems) > 0 {
		r.add(false, step, "%s (reply %s)", strings.Join(problems, "; "), clip(line))
		return rep, rep.ID == req.ID
	}
	r.add(true, step, "%s", clip(line))
	return rep, true
}

// strictDecode rejects trailing data and type mismatches.
func strictDecode(line string, v any) error {
	dec := json.NewDecoder(strings.NewReader(line))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value on the line")
	}
	return nil
}

func clip(s string) string {
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}

// checkPoints checks every fault point the client declares in its ready
// message: asked to stop there (stop_at, stop "pause") on an operation that
// gets there with no other client about, it must announce the stop (a
// notice with the request's id and "stopped"), freeze its own process group,
// and once locktest sends SIGCONT, go on and answer the request as usual.
// A crash point is the same stop with SIGKILL: only pauses are tried here.
func checkPoints(r *Report, c *client, d time.Duration) {
	if c.ready.Lock == nil {
		return
	}
	for _, pt := range c.ready.Lock.Points {
		step := fmt.Sprintf("fault point %s of client %d", pt.Name, c.id)
		stop := protocol.Request{Op: pt.Op, StopAt: pt.Name, Stop: protocol.StopPause}
		switch pt.Op {
		case protocol.OpAcquire:
			l, ok := expectStop(r, c, stop, d)
			if ok {
				expect(r, c, protocol.Request{Op: protocol.OpRelease, Owner: l.Owner}, d, "ok", "")
			}
		case protocol.OpRelease, protocol.OpRead, protocol.OpWrite:
			l, ok := expect(r, c, protocol.Request{Op: protocol.OpAcquire}, d, "ok", "")
			if !ok {
				continue
			}
			if pt.Op == protocol.OpRelease {
				stop.Owner = l.Owner
				expectStop(r, c, stop, d)
				continue
			}
			if _, ok := expectStop(r, c, stop, d); ok {
				expect(r, c, protocol.Request{Op: protocol.OpRelease, Owner: l.Owner}, d, "ok", "")
			}
		default:
			r.add(false, step, "op %q: a fault point lies in acquire, release, read or write", pt.Op)
		}
	}
}

// expectStop sends req, which asks the client to stop itself at a point,
// checks the notice and the stop, resumes the client and checks its answer
// (ok: nobody else holds the lock).
func expectStop(r *Report, c *client, req protocol.Request, d time.Duration) (protocol.Reply, bool) {
	step := fmt.Sprintf("%s by client %d, stopping at %s", req.Op, c.id, req.StopAt)
	req, ok := send(r, c, req, step)
	if !ok {
		return protocol.Reply{}, false
	}
	line, ok := c.line(d)
	if !ok {
		r.add(false, step, "no notice within %s (the ready message lists the point %s)", d, req.StopAt)
		return protocol.Reply{}, false
	}
	var n protocol.Reply
	if err := strictDecode(line, &n); err != nil || n.ID != req.ID || n.Stopped != req.StopAt || n.Stop != protocol.StopPause {
		r.add(false, step, "want the notice {\"id\":%d,\"stopped\":%q,\"stop\":\"pause\"} before the client stops, got %s", req.ID, req.StopAt, clip(line))
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGCONT)
		if n.Stopped == "" && err == nil {
			return checkReply(r, step, req, line, "ok", "")
		}
		return protocol.Reply{}, false
	}
	pid := c.cmd.Process.Pid
	if err := proc.WaitStopped(pid, d); err != nil {
		r.add(false, step, "announced the stop but did not stop itself (SIGSTOP on its own process group) within %s", d)
	} else {
		r.add(true, step, "announced %s and stopped itself", clip(line))
	}
	// A client frozen at the point must not answer until it is resumed.
	if l, ok := c.line(200 * time.Millisecond); ok {
		r.add(false, step, "answered %s while it should be stopped", clip(l))
		return protocol.Reply{}, false
	}
	_ = syscall.Kill(-pid, syscall.SIGCONT)
	line, ok = c.line(d)
	if !ok {
		r.add(false, step, "no answer within %s after SIGCONT", d)
		return protocol.Reply{}, false
	}
	return checkReply(r, step+", resumed", req, line, "ok", "")
}
