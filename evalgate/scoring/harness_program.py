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
- only when ``check`` has returned and no call to the candidate raised (tests may catch what it raised) does it
  write ``(nonce, "passed", None)`` to the verdict descriptor; anything else (an exception, the candidate process
  ending, this process being killed) is no pass.
"""

import _signal as signal  # the C module: `signal` would import enum (~5-20 ms per sample)
import ctypes
import os
import sys
import time

# No json, re or traceback here: each import is paid once per sample (a few ms on a loaded machine, against a
# program that otherwise starts in ~20 ms); values cross in the small tagged format below instead.
MAX_MESSAGE = 64 << 20  # bytes; a larger message from the candidate process is refused
MAX_DEPTH = 200  # nesting of a value, checked on decoding


def encode(x, depth=0):
    """Bytes for a value made of builtin types only (exact types: a subclass or any other object is refused).

    Format: one tag byte, then ``N:`` (N a decimal length) and the payload; containers give their item count and
    then their items. ``decode`` reverses it.
    """
    t = type(x)
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    if x is None:
        return b"n"
    if t is bool:
        return b"T" if x else b"F"
    if t in (int, float, complex):
        body = repr(x).encode()
        return {int: b"i", float: b"f", complex: b"c"}[t] + b"%d:" % len(body) + body
    if t is str:
        body = x.encode("utf-8", "surrogatepass")
        return b"s%d:" % len(body) + body
    if t is bytes:
        return b"b%d:" % len(x) + x
    if t is dict:
        items = [encode(k, depth + 1) + encode(v, depth + 1) for k, v in x.items()]
        return b"d%d:" % len(items) + b"".join(items)
    if t in _TAGS:
        return _TAGS[t] + b"%d:" % len(x) + b"".join(encode(v, depth + 1) for v in x)
    raise TypeError(f"a value of type {t.__module__}.{t.__qualname__} (only builtin values are compared)")


_TAGS = {list: b"l", tuple: b"t", set: b"S", frozenset: b"z"}
_BY_TAG = {v[0]: k for k, v in _TAGS.items()}


def decode(data):
    """The value ``encode`` gave ``data`` for; raises ValueError for anything else (trailing bytes included)."""
    value, end = _decode(data, 0, 0)
    if end != len(data):
        raise ValueError("trailing bytes")
    return value


def _length(data, i):
    j = data.index(b":", i, i + 24)
    digits = data[i:j]
    if not digits.isdigit():
        raise ValueError("malformed length")
    return int(digits), j + 1


def _decode(data, i, depth):
    if depth > MAX_DEPTH or i >= len(data):
        raise ValueError("malformed value")
    tag = data[i]
    if tag in b"nTF":
        return {110: None, 84: True, 70: False}[tag], i + 1
    n, i = _length(data, i + 1)
    if tag in b"ifcsb":
        body = data[i:i + n]
        if len(body) != n:
            raise ValueError("truncated value")
        if tag == 115:  # s
            return body.decode("utf-8", "surrogatepass"), i + n
        if tag == 98:  # b
            return bytes(body), i + n
        text = body.decode("ascii")
        return {105: int, 102: float, 99: complex}[tag](text), i + n
    if tag == 100:  # d
        out = {}
        for _ in range(n):
            k, i = _decode(data, i, depth + 1)
            out[k], i = _decode(data, i, depth + 1)
        return out, i
    if tag in _BY_TAG:
        items = []
        for _ in range(n):
            v, i = _decode(data, i, depth + 1)
            items.append(v)
        return _BY_TAG[tag](items), i
    raise ValueError(f"malformed value (tag {tag!r})")


class Channel:
    """Length-prefixed messages (tuples in ``encode``'s format) over a pair of pipe descriptors."""

    def __init__(self, rfd, wfd):
        self.rfd, self.wfd = rfd, wfd

    def send(self, msg):
        data = encode(msg)
        data = len(data).to_bytes(8, "big") + data
        while data:
            data = data[os.write(self.wfd, data):]

    def _read(self, n):
        parts, got = [], 0
        while got < n:
            chunk = os.read(self.rfd, min(n - got, 1 << 20))
            if not chunk:
                raise EOFError("the candidate's process ended")
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    def recv(self):
        n = int.from_bytes(self._read(8), "big")
        if n > MAX_MESSAGE:
            raise ValueError(f"message of {n} bytes")
        msg = decode(self._read(n))
        if type(msg) is not tuple or not msg:
            raise ValueError("malformed message")
        return msg


# -- the candidate process: runs the model's code, answers calls --------------------------------------------------
def _exception(e):
    return ("raise", type(e).__name__, str(e)[:500])


def candidate_main(chan, entry_point):
    """Run candidate.py in a fresh namespace, then answer ``("call", args, kwargs)`` messages until the end."""
    try:
        with open("candidate.py", encoding="utf-8") as f:
            code = compile(f.read(), "candidate.py", "exec")
        ns = {"__name__": "candidate", "__builtins__": __builtins__}
        exec(code, ns)  # noqa: S102 - the sandboxed model code
        fn = ns.get(entry_point)
        if not callable(fn):
            raise NameError(f"the code defines no function {entry_point!r}")
    except BaseException as e:  # SystemExit included: the code did not load
        chan.send(("load", type(e).__name__, str(e)[:500]))
        return
    chan.send(("ready",))
    while True:
        _, args, kwargs = chan.recv()
        try:
            out = fn(*args, **kwargs)
        except BaseException as e:
            chan.send(_exception(e))
            continue
        try:  # send() encodes the whole message before it writes a byte
            chan.send(("ok", out))
        except (TypeError, ValueError, RecursionError) as e:
            chan.send(("refused", str(e)[:500]))


# -- the trusted process -------------------------------------------------------------------------------------------
class CandidateFailed(Exception):
    """The candidate's code did not load, or a call did not return a builtin value."""


def _builtin_exception(name, msg):
    cls = getattr(__builtins__, name, None) if not isinstance(__builtins__, dict) else __builtins__.get(name)
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        return cls(msg)
    return CandidateFailed(f"{name}: {msg}")


def make_proxy(chan, raised):
    """The ``candidate`` the tests call: a function forwarding each call to the candidate process. Every call
    that does not return a value (the candidate raised, returned a value that is not builtin data, or its process
    ended) is appended to ``raised``, whatever the tests then do with the exception."""

    def candidate(*args, **kwargs):
        try:
            chan.send(("call", args, kwargs))
            reply = chan.recv()
        except BaseException as e:
            raised.append(f"the call did not complete: {type(e).__name__}: {e}"[:300])
            raise
        if len(reply) == 2 and reply[0] == "ok":
            return reply[1]
        if len(reply) == 3 and reply[0] == "raise" and type(reply[1]) is str:
            raised.append(f"{reply[1]}: {reply[2]}"[:300])
            raise _builtin_exception(reply[1], str(reply[2]))
        raised.append(f"the candidate returned {str(reply[-1])[:300]}")
        raise CandidateFailed(raised[-1])

    return candidate


def _where(e):
    tb, line = e.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "test.py":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (test.py line {line})" if line else ""


def run_tests(job, chan):
    """Run the job's tests against the candidate; ``job``: (nonce, prompt, test, entry_point); returns
    (verdict, detail)."""
    _, prompt, test, entry_point = job
    chan.send(("load", entry_point))
    reply = chan.recv()
    if reply != ("ready",):
        detail = f"{reply[1]}: {reply[2]}" if len(reply) == 3 else "no answer"
        return "failed", f"the code did not load: {detail}"[:500]
    ns = {"__name__": "tests"}
    try:
        exec(compile(prompt, "prompt.py", "exec"), ns)  # noqa: S102 - the item's own prompt
        exec(compile(test, "test.py", "exec"), ns)  # noqa: S102 - the item's own tests
        check = ns["check"]
    except BaseException as e:
        return "error", f"the item's prompt or tests do not run: {type(e).__name__}: {e}"[:500]
    raised = []
    proxy = make_proxy(chan, raised)
    # A test may call the function by its name too (HumanEval/33 compares candidate(x) with sort_third(x)): in the
    # reference harness that name is the completed function, so it is the proxy here as well.
    ns[entry_point] = proxy
    try:
        check(proxy)
    except BaseException as e:
        return "failed", f"{type(e).__name__}: {e}"[:400] + _where(e)
    if raised:  # the tests caught it (`except ValueError: pass`, a StopIteration that ended a `map`)
        return "failed", f"the candidate raised in {len(raised)} call(s) the tests caught; first: {raised[0]}"[:500]
    return "passed", None


def _no_dump():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _limit_verdict(pid):
    """``timeout`` or ``error`` when the candidate's process was killed by a resource limit (CPU time: SIGXCPU;
    memory or file size: SIGSEGV, SIGXFSZ, SIGKILL), else None; waits at most about 1 s for it to end (its
    request pipe is closed before, so a candidate waiting for a call ends at once)."""
    for _ in range(500):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if not os.WIFSIGNALED(status):
                return None
            sig = os.WTERMSIG(status)
            return "timeout" if sig == signal.SIGXCPU else "error" if sig in (
                signal.SIGSEGV, signal.SIGXFSZ, signal.SIGKILL) else None
        time.sleep(0.002)
    return None


def _preload(names):
    """Import the modules the item's prompt imports (public: the prompt is in candidate.py) before the fork, so
    the trusted process and the candidate share them instead of importing each (``typing`` alone is ~10-30 ms)."""
    for name in names:
        try:
            __import__(name)
        except BaseException:  # noqa: S110 - the candidate's own import then reports it
            pass


def main():
    """``program.py JOB_FD VERDICT_FD [MODULE ...]``: the trusted process (see the module docstring)."""
    job_fd, verdict_fd = int(sys.argv[1]), int(sys.argv[2])
    _no_dump()
    _preload([n for n in sys.argv[3:] if n.replace(".", "").replace("_", "").isalnum()])
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
        job = decode(f.read())
    try:
        verdict, detail = run_tests(job, Channel(resp_r, req_w))
    except BaseException as e:
        verdict, detail = "failed", f"{type(e).__name__}: {e}"[:500]
    if verdict == "failed":
        os.close(req_w)  # the candidate, waiting for the next call, reads end of file and exits
        os.close(resp_r)
        verdict = _limit_verdict(pid) or verdict
    with os.fdopen(verdict_fd, "wb") as out:
        out.write(encode((job[0], verdict, detail)))
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass


if __name__ == "__main__":
    main()
