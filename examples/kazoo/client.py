#!/usr/bin/python3
"""A locktest client for kazoo's Lock recipe (Debian: python3-kazoo).

locktest starts this program once per client process and talks to it in
JSON lines on stdin/stdout (docs/protocol.md). The lock is kazoo's own
kazoo.recipe.lock.Lock (ephemeral sequential nodes, each waiter watching its
predecessor); the ZooKeeper session timeout is locktest's --ttl. The fencing
token is the lock node's sequence number, which grows with every grant.
"""
import json
import os
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main():
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
    send({"type": "ready", "version": 1, "pid": os.getpid(),
          "lock": {"name": "kazoo Lock", "lease": True, "fencing": True,
                   "renews": True, "session": True}})
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
