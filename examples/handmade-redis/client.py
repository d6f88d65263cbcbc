#!/usr/bin/env python3
"""A locktest client (docs/protocol.md) around a lock written by hand on redis-py primitives.

The lock, in a few lines:
  acquire  SET key owner NX PX ttl   (with fencing: the same SET and an INCR of key:fence in one script)
  check    before each read and write: is the lease still valid by our own clock?
           (it started, at the latest, when we sent the SET: valid until then + ttl - drift)
  release  a Lua compare-and-delete: DEL key only if its value is still our owner id

The gap between the validity check and the write is declared as the fault point
`after-check`: a pause there lets the write land after the lease has expired.

Only redis-py's Connection is used (one command, one reply, no hidden retry), so a
request that never left (connection refused) is told apart from one whose reply was
lost (timeout, reset): the first answers fail/error, the second info.
"""

import json
import os
import random
import signal
import sys
import time

try:
    import redis
    from redis.connection import Connection
except ImportError:
    # `python3` may be a pyenv or venv interpreter without python3-redis: run again
    # under Debian's, with exec so that the pid locktest started stays this program's.
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

ACQUIRE_FENCED = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"""


class Indeterminate(Exception):
    """The request was sent but its reply is unknown: it may have taken effect."""


class NeverSent(Exception):
    """The request surely did not reach the server."""


def send(line):
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


class HandmadeLock:
    def __init__(self, hello):
        host, port = hello["servers"][0].rsplit(":", 1)
        timeout = hello["op_timeout_ms"] / 1000.0
        self.conn = Connection(host=host, port=int(port), socket_timeout=timeout,
                               socket_connect_timeout=timeout, decode_responses=True)
        self.key = hello["key"]
        self.ttl_ms = int(hello["ttl_ms"])
        self.fence = bool(hello.get("fence"))
        self.wait = bool(hello.get("wait"))
        self.wait_timeout_ms = int(hello.get("wait_timeout_ms", 0))
        self.rng = random.Random("%s-%s" % (hello.get("seed", 0), hello["client"]))
        self.client = hello["client"]
        self.count = 0
        self.offset_ms = 0.0      # the clock-client fault sets our clock's offset
        self.valid_until = None   # by now_ms(); None when we believe we hold nothing
        self.owner = None

    def now_ms(self):
        return time.monotonic() * 1000.0 + self.offset_ms

    def call(self, *args):
        """One command, one reply. NeverSent if the connection cannot be made."""
        try:
            self.conn.connect()
        except redis.ConnectionError as e:
            self.conn.disconnect()
            raise NeverSent(str(e))
        try:
            self.conn.send_command(*args)
            return self.conn.read_response()
        except redis.ResponseError:
            raise  # the server refused the command: it did not run
        except (redis.RedisError, OSError) as e:
            self.conn.disconnect()  # a late reply must not be read as the next one's
            raise Indeterminate(str(e) or type(e).__name__)

    def try_acquire(self, owner):
        if self.fence:
            token = self.call("EVAL", ACQUIRE_FENCED, 2, self.key, self.key + ":fence",
                              owner, self.ttl_ms)
            return int(token) if token else None
        return 0 if self.call("SET", self.key, owner, "NX", "PX", self.ttl_ms) else None

    def acquire(self):
        self.count += 1
        owner = "c%s-%d-%08x" % (self.client, self.count, self.rng.getrandbits(32))
        deadline = time.monotonic() + (self.wait_timeout_ms / 1000.0 if self.wait else 0)
        maybe_ours = None  # when a try whose reply was lost began: it may have been a grant
        while True:
            start = self.now_ms()
            try:
                token = self.try_acquire(owner)
                if token is None and maybe_ours is not None:
                    # Was the lost reply a grant? While our key lives no one else can have
                    # taken a token, so key:fence is still ours.
                    value, fence = self.call("MGET", self.key, self.key + ":fence")
                    if value == owner:
                        return self.granted(owner, maybe_ours, int(fence or 0))
            except (Indeterminate, NeverSent, redis.ResponseError) as e:
                if maybe_ours is None and not isinstance(e, Indeterminate):
                    raise  # nothing of ours can be on the server: a sure failure
                maybe_ours = start if maybe_ours is None else maybe_ours
                if not self.wait or time.monotonic() >= deadline:
                    return {"outcome": "info", "error": str(e)}
                continue
            if token is not None:
                return self.granted(owner, start, token)
            if not self.wait or time.monotonic() >= deadline:
                if maybe_ours is not None:
                    return {"outcome": "info", "error": "a try's reply was lost; the lock is held"}
                return {"outcome": "fail", "reason": "held", "error": "lock held by another client"}
            time.sleep(min(0.02, max(0.0, deadline - time.monotonic())))

    def granted(self, owner, start, token):
        # The server's PX clock started after we sent the SET: counting from `start` is
        # safe; take off a drift allowance as Redlock does.
        self.valid_until = start + self.ttl_ms - (self.ttl_ms * 0.01 + 2)
        self.owner = owner
        reply = {"outcome": "ok", "owner": owner,
                 "valid_ms": max(0, int(self.valid_until - self.now_ms()))}
        if token is not None and self.fence:
            reply["token"] = token
        return reply

    def valid(self):
        return self.valid_until is not None and self.now_ms() < self.valid_until

    def use(self, req):
        if not self.valid():
            return {"outcome": "fail", "reason": "not-held", "error": "lease expired by our clock"}
        if req["op"] == "write" and req.get("stop_at") == "after-check":
            stop = req.get("stop", "pause")
            send({"id": req["id"], "stopped": "after-check", "stop": stop})
            os.kill(os.getpid(), signal.SIGKILL if stop == "crash" else signal.SIGSTOP)
        return {"outcome": "ok"}

    def release(self, owner):
        self.valid_until = None if owner == self.owner else self.valid_until
        if self.call("EVAL", RELEASE, 1, self.key, owner) == 1:
            return {"outcome": "ok", "removed": owner}
        return {"outcome": "fail", "reason": "not-owner", "error": "lock no longer ours"}


def handle(lock, req):
    op = req.get("op")
    try:
        if op == "acquire":
            return lock.acquire()
        if op in ("read", "write"):
            return lock.use(req)
        if op == "release":
            return lock.release(req.get("owner", ""))
        if op == "clock":
            lock.offset_ms = float(req.get("offset_ms", 0))  # absolute; absent: real time again
            return {"outcome": "ok"}
        return {"outcome": "fail", "reason": "error", "error": "unknown op %r" % op}
    except NeverSent as e:
        return {"outcome": "fail", "reason": "error", "error": str(e)}
    except redis.ResponseError as e:
        return {"outcome": "fail", "reason": "error", "error": str(e)}
    except Indeterminate as e:
        return {"outcome": "info", "error": str(e)}


def main():
    hello = json.loads(sys.stdin.readline())
    if hello.get("type") != "hello" or hello.get("version") != 1:
        send({"type": "ready", "version": 1, "pid": os.getpid(),
              "error": "expected a version 1 hello, got %r" % hello.get("type")})
        return 2
    lock = HandmadeLock(hello)
    send({"type": "ready", "version": 1, "pid": os.getpid(), "lock": {
        "name": "handmade SET NX PX lock (redis-py %s)" % redis.__version__,
        "lease": True, "fencing": lock.fence, "checks_validity": True,
        # A crash here only drops a write: the lease runs out as it would. A pause can hurt.
        "points": [{"name": "after-check", "op": "write", "stops": ["pause"],
                    "summary": "the lease was valid by our clock, the write not yet answered"}]}})
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("op") == "shutdown":
            send({"id": req["id"], "outcome": "ok"})
            return 0
        reply = handle(lock, req)
        reply["id"] = req["id"]
        send(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
