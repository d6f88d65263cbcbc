#!/usr/bin/python3
"""A locktest client for redis-py's Lock (Debian: python3-redis).

locktest starts this program once per client process and talks to it in
JSON lines on stdin/stdout (docs/protocol.md). Everything here is glue: the
lock itself is redis-py's own redis.lock.Lock, used the way its
documentation shows. Copy this file to test your own redis-py settings.

With --owned, the client does what careful redis-py code does before it acts:
it asks the server whether the lock is still its own (Lock.owned()) before
each write, and answers not-held when it is not. That check and the write
are two steps, so the client declares the gap between them as a fault point
("after-check"): when locktest asks (stop_at), it stops itself right there,
after the check passed, which is where a pause defeats the check.
"""
import json
import os
import signal
import sys

import redis
from redis.exceptions import ConnectionError, LockError, LockNotOwnedError, TimeoutError


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def outcome_of(err):
    """A request that never left (connection refused) surely had no effect;
    anything after it was sent (timeout, reset) may have."""
    text = str(err)
    if isinstance(err, ConnectionError) and ("refused" in text or "Error 111" in text):
        return {"outcome": "fail", "reason": "error", "error": text}
    return {"outcome": "info", "error": text}


def stop_at(req, point):
    """Stop this process at point if req asks for it: announce it, then
    SIGSTOP (locktest sends SIGCONT after the fault) or SIGKILL."""
    if req.get("stop_at") != point:
        return
    how = req.get("stop") or "pause"
    send({"id": req["id"], "stopped": point, "stop": how})
    os.kill(os.getpid(), signal.SIGKILL if how == "crash" else signal.SIGSTOP)


def main():
    owned_check = "--owned" in sys.argv[1:]
    hello = json.loads(sys.stdin.readline())
    host, port = hello["servers"][0].rsplit(":", 1)
    op_timeout = hello.get("op_timeout_ms", 1000) / 1000.0
    r = redis.Redis(host=host, port=int(port), socket_timeout=op_timeout,
                    socket_connect_timeout=op_timeout, retry_on_timeout=False)
    lock = r.lock(hello["key"], timeout=hello["ttl_ms"] / 1000.0,
                  blocking=bool(hello.get("wait")),
                  blocking_timeout=hello.get("wait_timeout_ms", 5000) / 1000.0,
                  thread_local=False)
    info = {"name": "redis-py %s Lock" % redis.__version__, "lease": True}
    if owned_check:
        info["name"] += ", Lock.owned() before each write"
        info["points"] = [{"name": "after-check", "op": "write",
                           "summary": "Lock.owned() said yes, the write not yet answered"}]
    send({"type": "ready", "version": 1, "pid": os.getpid(), "lock": info})
    seq = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        rep = {"id": req["id"], "outcome": "ok"}
        op = req.get("op")
        try:
            if op == "acquire":
                seq += 1
                owner = "c%d-%d-%s" % (hello["client"], seq, os.urandom(4).hex())
                if lock.acquire(token=owner):
                    rep["owner"] = owner
                else:
                    rep.update(outcome="fail", reason="held", error="lock held by another client")
            elif op == "release":
                lock.release()
            elif op == "write" and owned_check:
                if lock.owned():
                    stop_at(req, "after-check")
                else:
                    rep.update(outcome="fail", reason="not-held", error="Lock.owned() is false")
            elif op in ("read", "write"):
                pass  # redis-py's Lock does not stop anyone using the resource
            elif op == "shutdown":
                send(rep)
                return
            else:
                rep.update(outcome="fail", reason="error", error="unsupported op %r" % op)
        except LockNotOwnedError as e:
            rep.update(outcome="fail", reason="not-owner", error=str(e))
        except (ConnectionError, TimeoutError) as e:
            rep = dict(outcome_of(e), id=req["id"])
        except LockError as e:
            rep.update(outcome="fail", reason="error", error=str(e))
        send(rep)


if __name__ == "__main__":
    main()
