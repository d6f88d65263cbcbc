#!/usr/bin/python3
"""A locktest client for kazoo's Lock recipe (Debian: python3-kazoo).

locktest starts this program once per client process and talks to it in
JSON lines on stdin/stdout (docs/protocol.md). The lock is kazoo's own
kazoo.recipe.lock.Lock (ephemeral sequential nodes, each waiter watching its
predecessor); the ZooKeeper session timeout is locktest's --ttl. The fencing
token is the lock node's sequence number, which grows with every grant.

With --connected, the client does what kazoo's documentation asks of careful
code before it acts: it checks the connection state (KazooState.CONNECTED;
SUSPENDED or LOST mean the lock may be gone) before each write, and answers
not-held when it is not connected. That check and the write are two steps,
so the client declares the gap between them as a fault point ("after-check"):
when locktest asks (stop_at), it stops itself right there, after the check
passed, which is where a pause defeats the check.
"""
import json
import os
import signal
import sys

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def stop_at(req, point):
    """Stop this process at point if req asks for it: announce it, then
    SIGSTOP (locktest sends SIGCONT after the fault) or SIGKILL. Sent from
    the main thread, which the kernel picks first for a signal to its own
    process."""
    if req.get("stop_at") != point:
        return
    how = req.get("stop") or "pause"
    send({"id": req["id"], "stopped": point, "stop": how})
    os.kill(os.getpid(), signal.SIGKILL if how == "crash" else signal.SIGSTOP)


def main():
    connected_check = "--connected" in sys.argv[1:]
    hello = json.loads(sys.stdin.readline())
    ttl = hello["ttl_ms"] / 1000.0
    op_timeout = hello.get("op_timeout_ms", 1000) / 1000.0
    zk = KazooClient(hosts=",".join(hello["servers"]), timeout=ttl)
    try:
        zk.start(timeout=10)
    except KazooTimeoutError as e:
        send({"type": "ready", "version": 1, "pid": os.getpid(), "error": "cannot reach ZooKeeper: %s" % e})
        return
    path = "/locktest/" + hello["key"].replace(":", "-")
    lock = zk.Lock(path, "client-%d" % hello["client"])
    info = {"name": "kazoo Lock", "lease": True, "fencing": True,
            "renews": True, "session": True}
    if connected_check:
        info["name"] += ", connection state checked before each write"
        info["points"] = [{"name": "after-check", "op": "write", "stops": ["pause"],
                           "summary": "the client saw KazooState.CONNECTED, the write not yet answered"}]
    send({"type": "ready", "version": 1, "pid": os.getpid(), "lock": info})
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        rep = {"id": req["id"], "outcome": "ok"}
        op = req.get("op")
        try:
            if op == "acquire":
                got = lock.acquire(blocking=bool(hello.get("wait")),
                                   timeout=hello.get("wait_timeout_ms", 5000) / 1000.0 if hello.get("wait") else None)
                if got:
                    node = lock.node or ""
                    rep["owner"] = "%s/%s" % (path, node)
                    digits = node[-10:]
                    if digits.isdigit():
                        rep["token"] = int(digits)
                else:
                    # A non-blocking acquire fails when any node precedes
                    # ours: the holder's, or another try's that is about to
                    # go away. The recipe cannot tell which: "contended",
                    # not "held" (a free lock can refuse two racing tries).
                    rep.update(outcome="fail", reason="contended", error="a node precedes ours: held or contended")
            elif op == "release":
                if not lock.release():
                    rep.update(outcome="fail", reason="not-owner", error="kazoo says the lock was not held")
            elif op == "write" and connected_check:
                if zk.state == KazooState.CONNECTED:
                    stop_at(req, "after-check")
                else:
                    rep.update(outcome="fail", reason="not-held", error="connection state %s" % zk.state)
            elif op in ("read", "write"):
                pass  # like most users' code: no check that the session is still alive
            elif op == "shutdown":
                send(rep)
                zk.stop()
                return
            else:
                rep.update(outcome="fail", reason="error", error="unsupported op %r" % op)
        except NoNodeError as e:
            rep.update(outcome="fail", reason="not-owner", error="lock node gone: %r" % e)
        except (ConnectionLoss, SessionExpiredError, KazooTimeoutError, KazooException) as e:
            rep.update(outcome="info", error=repr(e))
        send(rep)


if __name__ == "__main__":
    main()
