"""evalgate's test harness as it runs inside the code sandbox (``program.py`` there); standard library only.

Not imported by evalgate: ``evalgate.scoring.harness`` runs this file's text in the sandbox (``run_code``) as
``program.py JOB_FD VERDICT_FD``, beside ``candidate.py`` (the model's code: the item's prompt and the completion).
docs/SANDBOX.md ("Trust model") says why each step is here. In short:

- this process (the *trusted* part) makes itself non-dumpable first, so that no other process of the sandbox's
  user can ptrace it, read its memory or open its file descriptors through ``/proc``;
- it forks the *candidate* process before it reads anything secret; the candidate closes the job and verdict
  descriptors before any model code runs, then compiles ``candidate.py`` on its own (a dangling decorator is a
  syntax error there, it cannot reach the tests) and runs it in a fresh namespace;
- the trusted part reads the job (a per-run nonce, the item's prompt and test code) from its descriptor, runs the
  prompt (for its helpers, e.g. ``poly`` in HumanEval/32) and the tests in its own namespace, and calls
  ``check(candidate)`` with a proxy: each call's arguments go to the candidate process and the result comes back
  as data (builtin types only, rebuilt here), so nothing the model defined runs in this process, not even an
  ``__eq__``;
- only when ``check`` has returned does it write ``{"nonce": ..., "verdict": "passed"}`` to the verdict
  descriptor; anything else (an exception, the candidate process ending, this process being killed) is no pass.
"""

import ctypes
import json
import os
import signal
import sys
import time
import traceback

MAX_MESSAGE = 64 << 20  # bytes; a larger message from the candidate process is refused
_SCALARS = (type(None), bool, int, float, str)
_CONTAINERS = {list: "l", tuple: "t", set: "s", frozenset: "f"}
_BY_TAG = {v: k for k, v in _CONTAINERS.items()}


def encode(x):
    """A JSON-able form of a value made of builtin types only (exact types: a subclass is refused)."""
    t = type(x)
    if t in _SCALARS:
        return x
    if t in _CONTAINERS:
        return [_CONTAINERS[t], [encode(v) for v in x]]
    if t is dict:
        return ["d", [[encode(k), encode(v)] for k, v in x.items()]]
    if t is bytes:
        return ["b", x.hex()]
    if t is complex:
        return ["c", [x.real, x.imag]]
    raise TypeError(f"a value of type {t.__module__}.{t.__qualname__} (only builtin values are compared)")


def decode(x):
    """The value ``encode`` gave ``x`` for; raises ValueError/TypeError for anything else."""
    t = type(x)
    if t in _SCALARS:
        return x
    if t is not list or len(x) != 2 or type(x[0]) is not str:
        raise ValueError("malformed value")
    tag, v = x
    if tag in _BY_TAG and type(v) is list:
        return _BY_TAG[tag](decode(e) for e in v)
    if tag == "d" and type(v) is list:
        return {decode(k): decode(e) for k, e in (_pair(p) for p in v)}
    if tag == "b" and type(v) is str:
        return bytes.fromhex(v)
    if tag == "c" and type(v) is list and len(v) == 2 and all(type(e) in (int, float) for e in v):
        return complex(v[0], v[1])
    raise ValueError(f"malformed value (tag {tag!r})")


def _pair(p):
    if type(p) is not list or len(p) != 2:
        raise ValueError("malformed dict item")
    return p


class Channel:
    """Length-prefixed JSON messages over a pair of pipe descriptors."""

    def __init__(self, rfd, wfd):
        self.rfd, self.wfd = rfd, wfd

    def send(self, msg):
        data = json.dumps(msg).encode()
        data = len(data).to_bytes(8, "big") + data
        while data:
            data = data[os.write(self.wfd, data):]

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = os.read(self.rfd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise EOFError("the candidate's process ended")
            buf += chunk
        return buf

    def recv(self):
        n = int.from_bytes(self._read(8), "big")
        if n > MAX_MESSAGE:
            raise ValueError(f"message of {n} bytes")
        return json.loads(self._read(n))


# -- the candidate process: runs the model's code, answers calls --------------------------------------------------
def _exception(e):
    return ["raise", type(e).__name__, str(e)[:500]]


def candidate_main(chan, entry_point):
    """Run candidate.py in a fresh namespace, then answer ``["call", args, kwargs]`` messages until the end."""
    try:
        with open("candidate.py", encoding="utf-8") as f:
            code = compile(f.read(), "candidate.py", "exec")
        ns = {"__name__": "candidate", "__builtins__": __builtins__}
        exec(code, ns)  # noqa: S102 - the sandboxed model code
        fn = ns.get(entry_point)
        if not callable(fn):
            raise NameError(f"the code defines no function {entry_point!r}")
    except BaseException as e:  # SystemExit included: the code did not load
        chan.send(["load"] + _exception(e)[1:] + [traceback.format_exc(limit=-1)[-500:]])
        return
    chan.send(["ready"])
    while True:
        msg = chan.recv()
        try:
            out = fn(*decode(msg[1]), **decode(msg[2]))
        except BaseException as e:
            chan.send(_exception(e))
            continue
        try:
            chan.send(["ok", encode(out)])
        except (TypeError, ValueError, RecursionError) as e:
            chan.send(["refused", str(e)[:500]])


# -- the trusted process -------------------------------------------------------------------------------------------
class CandidateFailed(Exception):
    """The candidate's code did not load, or a call did not return a builtin value."""


def _builtin_exception(name, msg):
    cls = getattr(__builtins__, name, None) if not isinstance(__builtins__, dict) else __builtins__.get(name)
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        return cls(msg)
    return CandidateFailed(f"{name}: {msg}")


def make_proxy(chan):
    """The ``candidate`` the tests call: a function forwarding each call to the candidate process."""

    def candidate(*args, **kwargs):
        chan.send(["call", encode(list(args)), encode(kwargs)])
        reply = chan.recv()
        if type(reply) is list and len(reply) == 2 and reply[0] == "ok":
            return decode(reply[1])
        if type(reply) is list and len(reply) == 3 and reply[0] == "raise":
            raise _builtin_exception(str(reply[1]), str(reply[2]))
        raise CandidateFailed(f"the candidate returned {str(reply[1] if len(reply) > 1 else reply)[:300]}")

    return candidate


def _where(e):
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == "test.py"]
    return f" (test.py line {frames[-1].lineno})" if frames else ""


def run_tests(job, chan):
    """Run the job's tests against the candidate; returns (verdict, detail)."""
    chan.send(["load", job["entry_point"]])
    reply = chan.recv()
    if reply != ["ready"]:
        detail = f"{reply[1]}: {reply[2]}" if type(reply) is list and len(reply) > 2 else "no answer"
        return "failed", f"the code did not load: {detail}"[:500]
    ns = {"__name__": "tests"}
    try:
        exec(compile(job["prompt"], "prompt.py", "exec"), ns)  # noqa: S102 - the item's own prompt
        exec(compile(job["test"], "test.py", "exec"), ns)  # noqa: S102 - the item's own tests
        check = ns["check"]
    except BaseException as e:
        return "error", f"the item's prompt or tests do not run: {type(e).__name__}: {e}"[:500]
    proxy = make_proxy(chan)
    # A test may call the function by its name too (HumanEval/33 compares candidate(x) with sort_third(x)): in the
    # reference harness that name is the completed function, so it is the proxy here as well.
    ns[job["entry_point"]] = proxy
    try:
        check(proxy)
    except BaseException as e:
        return "failed", f"{type(e).__name__}: {e}"[:400] + _where(e)
    return "passed", None


def _no_dump():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _limit_verdict(pid):
    """``timeout`` or ``error`` when the candidate's process was killed by a resource limit (CPU time: SIGXCPU;
    memory or file size: SIGSEGV, SIGXFSZ, SIGKILL), else None; waits at most about 1 s for it to end."""
    for _ in range(100):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if not os.WIFSIGNALED(status):
                return None
            sig = os.WTERMSIG(status)
            return "timeout" if sig == signal.SIGXCPU else "error" if sig in (
                signal.SIGSEGV, signal.SIGXFSZ, signal.SIGKILL) else None
        time.sleep(0.01)
    return None


def main():
    job_fd, verdict_fd = int(sys.argv[1]), int(sys.argv[2])
    _no_dump()
    req_r, req_w = os.pipe()  # trusted -> candidate
    resp_r, resp_w = os.pipe()  # candidate -> trusted
    pid = os.fork()
    if pid == 0:
        try:  # before any model code runs: nothing of the job or the verdict stays reachable
            for fd in (job_fd, verdict_fd, req_w, resp_r):
                os.close(fd)
            chan = Channel(req_r, resp_w)
            msg = chan.recv()
            candidate_main(chan, msg[1])
        finally:
            os._exit(0)
    os.close(req_r)
    os.close(resp_w)
    with os.fdopen(job_fd, "rb") as f:
        job = json.loads(f.read())
    try:
        verdict, detail = run_tests(job, Channel(resp_r, req_w))
    except BaseException as e:
        verdict, detail = "failed", f"{type(e).__name__}: {e}"[:500]
    if verdict == "failed":
        verdict = _limit_verdict(pid) or verdict
    with os.fdopen(verdict_fd, "w") as out:
        out.write(json.dumps({"nonce": job["nonce"], "verdict": verdict, "detail": detail}))
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


if __name__ == "__main__":
    main()
