#!/usr/bin/python3
"""A locktest client for redis-py's Lock (Debian: python3-redis).

locktest starts this program once per client process and talks to it in
JSON lines on stdin/stdout (docs/protocol.md). Everything here is glue: the
lock itself is redis-py's own redis.lock.Lock, used the way its
documentation shows. Copy this file to test your own redis-py settings.
"""
import json
import os
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


def main():
    hello = json.loads(sys.stdin.readline())
    host, port = hello["servers"][0].rsplit(":", 1)
    op_timeout = hello.get("op_timeout_ms", 1000) / 1000.0
    r = redis.Redis(host=host, port=int(port), socket_timeout=op_timeout,
                    socket_connect_timeout=op_timeout, retry_on_timeout=False)
    lock = r.lock(hello["key"], timeout=hello["ttl_ms"] / 1000.0,
                  blocking=bool(hello.get("wait")),
                  blocking_timeout=hello.get("wait_timeout_ms", 5000) / 1000.0,
                  thread_local=False)
    send({"type": "ready", "version": 1, "pid": os.getpid(),
          "lock": {"name": "redis-py %s Lock" % redis.__version__, "lease": True}})
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
