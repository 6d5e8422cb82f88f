"""The code sandbox against programs a model under evaluation could write (issue 22), and its process handling.

The attack tests use only ``evalgate.scoring.run_code`` (the API older versions have too), so they can be run
against an older checkout to show what it let through. Each attack program exits 0 when every attempt was stopped
and 3, printing what it got, when one succeeded.
"""

import getpass
import os
import site
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalgate.scoring import run_code, run_many
from evalgate.store import Store
from tests.conftest import REPO

pytestmark = pytest.mark.integration
SECRET = "evalgate-sandbox-test-secret-" + uuid.uuid4().hex


def attack(body: str, **values: object) -> str:
    """A program running ``body`` (a function body returning what it got, or raising OSError/ImportError/KeyError
    when stopped) with ``values`` bound as globals."""
    consts = "".join(f"{k} = {v!r}\n" for k, v in values.items())
    return (f"import os, sys\n{consts}def attack():\n{textwrap.indent(body, '    ')}\n"
            "try:\n    got = attack()\nexcept (OSError, ImportError, KeyError) as e:\n"
            "    print('stopped:', type(e).__name__, e, file=sys.stderr)\n    raise SystemExit(0)\n"
            "if got:\n    sys.stderr.write('LEAKED ' + repr(got)[-1500:])\n    raise SystemExit(3)\n")


def assert_stopped(program: str) -> None:
    res = run_code(program, timeout_s=30.0)
    assert "LEAKED" not in res.stderr and SECRET not in res.stderr, f"[{res.isolation}] {res.stderr}"
    assert res.status == "passed", f"[{res.isolation}] the attack program did not run as written: {res.stderr}"


@pytest.fixture
def secrets(home: Path) -> dict[str, str]:
    """A real private split (encrypted, its key file created by evalgate, mode 600) and a real store, where the
    ``home`` fixture points EVALGATE_HOME, EVALGATE_SPLITS and XDG_CONFIG_HOME."""
    from evalgate.splits import key_file, splits_dir, write_split
    from evalgate.store import Store

    write_split("secret-private", "private", [{"id": "1", "prompt": SECRET}], {"source": "test"})
    store = Store()
    store.record_protocol("p", "1", "0" * 64, {"secret": SECRET})
    assert key_file().is_file() and store.path.is_file()
    return {"key": str(key_file()), "splits": str(splits_dir()), "store": str(store.path)}


def test_this_machine_has_every_layer() -> None:
    from evalgate.core.sandbox import LAYERS, describe

    d = describe()
    assert d["missing"] == [], (f"the code sandbox lacks {d['missing']} here ({d['isolation']}): install bubblewrap "
                                "(apt-get install bubblewrap; `make setup` does as root), see docs/SANDBOX.md")
    assert d["isolation"] == "+".join(LAYERS)


def test_key_file_by_absolute_path(secrets: dict[str, str]) -> None:
    assert_stopped(attack("return open(KEY).read()", KEY=secrets["key"]))


def test_key_file_and_listing_via_home() -> None:
    # Every way a program can name the home of the user running evalgate (its own directory aside); on these
    # machines that is /root, holding the real ~/.config/evalgate/private.key.
    body = """import pwd
homes = {os.path.expanduser('~'), os.path.expanduser('~' + USER), os.path.expanduser('~root')}
try:
    homes.add(pwd.getpwuid(UID).pw_dir)
except KeyError:
    pass
homes.discard(os.getcwd())  # "~" may be the program's own directory
got = {}
for h in homes:
    for name, read in (('list', lambda: os.listdir(h)),
                       ('key', lambda: open(os.path.join(h, '.config/evalgate/private.key')).read())):
        try:
            got[h + ' ' + name] = read()
        except OSError:
            pass
return {k: v for k, v in got.items() if v}
"""
    assert_stopped(attack(body, USER=getpass.getuser(), UID=os.getuid()))


def test_splits_directory(secrets: dict[str, str]) -> None:
    body = "return {f: open(os.path.join(D, f), 'rb').read()[:40] for f in os.listdir(D)}"
    assert_stopped(attack(body, D=secrets["splits"]))


def test_store(secrets: dict[str, str]) -> None:
    assert_stopped(attack("return open(DB, 'rb').read(64)", DB=secrets["store"]))


@pytest.mark.parametrize("directory", ["/root", str(REPO), str(Path.home())], ids=["root", "checkout", "home"])
def test_list_directory(directory: str) -> None:
    assert_stopped(attack("return os.listdir(D)", D=directory))


def test_other_process_environment_through_proc() -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={"EVALGATE_PRIVATE_KEY": SECRET})
    body = """got = []
try:
    got.append(open(f'/proc/{PID}/environ', 'rb').read())
except OSError:
    pass
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            env = open(f'/proc/{p}/environ', 'rb').read()
        except OSError:
            continue
        if b'EVALGATE_PRIVATE_KEY' in env:
            got.append(env)
return got
"""
    try:
        assert_stopped(attack(body, PID=victim.pid))
    finally:
        victim.kill()
        victim.wait()


def test_write_to_dev_shm_stays_private() -> None:
    name = f"/dev/shm/evalgate-sandbox-test-{uuid.uuid4().hex}"
    try:
        res = run_code(f"open({name!r}, 'w').write('left behind')\n", timeout_s=30.0)
        assert not os.path.exists(name), f"[{res.isolation}] the program wrote the host's /dev/shm"
        # nor does the next program see it
        assert_stopped(attack("return open(N).read()", N=name))
    finally:
        if os.path.exists(name):
            os.remove(name)


def test_fork_without_bound() -> None:
    # Wide, not recursive, so that an unbounded sandbox gets 300 sleeping processes, not a machine brought down.
    body = """import time
kids = 0
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    kids += 1
return f'{kids} processes'
"""
    assert_stopped(attack(body))


@pytest.mark.parametrize("module", ["cryptography", "duckdb", "evalgate"])
def test_import_of_evalgate_environment(module: str) -> None:
    # Also with the directories the packages live in put on sys.path by hand.
    paths = [*site.getsitepackages(), str(REPO), "/usr/lib/python3/dist-packages",
             "/usr/local/lib/python3/dist-packages"]
    body = "import importlib\nsys.path[:0] = PATHS\nreturn importlib.import_module(M).__file__"
    assert_stopped(attack(body, PATHS=paths, M=module))


def test_sys_is_absent_or_read_only() -> None:
    # writes back the value already set, so that where /sys is writable nothing changes on the host
    body = """f = '/sys/kernel/mm/transparent_hugepage/enabled'
now = open(f).read().split('[')[1].split(']')[0]
open(f, 'w').write(now)
return 'wrote /sys'
"""
    assert_stopped(attack(body))


# -- processes ----------------------------------------------------------------------------------------------------
def host_pids(marker: str) -> list[int]:
    """Live host processes whose command line holds ``marker``."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if marker.encode() in Path(f"/proc/{p}/cmdline").read_bytes():
                state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    out.append(int(p))
        except OSError:
            continue
    return out


def sleeper(marker: str) -> str:
    """Code that replaces the current process with one sleeping 60 s whose command line holds ``marker``."""
    return f"os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])"


def wait_for_host(flag: Path) -> str:
    """Code that waits (up to 60 s) for ``flag`` to exist: ``run_watched`` creates it once it has seen the marked
    processes, so a program exits only after the host saw its children, however slowly a loaded machine starts them
    (a fixed sleep was too short under load)."""
    return (f"import os, time\nt0 = time.monotonic()\n"
            f"while not os.path.exists({str(flag)!r}) and time.monotonic() - t0 < 60:\n    time.sleep(0.02)\n")


def run_watched(program: str, marker: str, count: int, flag: Path | None = None,
                **limits: Any) -> tuple[object, list[int], dict]:
    """Run ``program`` in a thread, wait until ``count`` processes marked ``marker`` run on the host (then create
    ``flag``, in a directory the program may write, see ``wait_for_host``), and return the result, their pids and
    their /proc status lines (Uid, CapEff) read while they ran."""
    box: dict = {}
    if flag is not None:
        limits["writable"] = [str(flag.parent)]
    t = threading.Thread(target=lambda: box.update(res=run_code(program, **limits)))
    t.start()
    deadline, pids = time.monotonic() + 120, []
    while len(pids) < count and time.monotonic() < deadline and t.is_alive():
        pids = host_pids(marker)
        time.sleep(0.02)
    status = {}
    for p in pids:
        try:
            lines = Path(f"/proc/{p}/status").read_text().splitlines()
            status[p] = {k: v.split() for k, v in (line.split(":", 1) for line in lines) if k in ("Uid", "CapEff")}
        except OSError:
            pass
    if flag is not None:
        flag.touch()
    t.join()
    assert len(pids) >= count, f"the program started {len(pids)} marked processes, not {count}: {box}"
    return box["res"], pids, status


def gone(marker: str, within_s: float = 30.0) -> bool:
    """Whether every live process holding ``marker`` has ended within ``within_s`` seconds (polled every 50 ms).

    The sandbox's kill is one SIGKILL to bubblewrap's group; its PID namespace then dies with it (the namespace's
    init gets SIGKILL through --die-with-parent, and the kernel kills and reaps every process left inside), which on
    a loaded 2-core machine (make test's two lanes at once) took more than 3 s for a fork bomb's 16 processes. A
    process that escaped is never gone, so a long bound loses nothing; a short one failed a sound kill."""
    deadline = time.monotonic() + within_s
    while host_pids(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_program_runs_unprivileged_even_when_evalgate_is_root() -> None:
    marker = uuid.uuid4().hex
    prog = (f"import os, sys, time\nassert os.getuid() != 0 and os.geteuid() != 0, 'root inside'\n"
            "assert open('/proc/self/status').read().split('CapEff:')[1].split()[0].strip('0') == '', 'caps'\n"
            f"{sleeper(marker)}\n")
    res, pids, status = run_watched(prog, marker, 1, timeout_s=3.0)
    assert res.status == "timeout", res.stderr
    uids = status[pids[0]]["Uid"]
    assert "0" not in uids, f"the program runs as host uid {uids}"
    assert int(status[pids[0]]["CapEff"][0], 16) == 0
    assert gone(marker)


def test_forked_sleeping_child_is_killed(shared_dir: Path) -> None:
    marker = uuid.uuid4().hex
    flag = shared_dir / "seen"
    prog = f"import os, sys, time\nif os.fork() == 0:\n    {sleeper(marker)}\n{wait_for_host(flag)}"
    res, _, _ = run_watched(prog, marker, 1, flag, timeout_s=90.0)
    assert res.status == "passed", res.stderr
    assert gone(marker), "the forked child survived the sandbox"


def test_child_and_grandchild_are_killed_on_timeout() -> None:
    marker = uuid.uuid4().hex
    prog = f"import os, sys, time\nif os.fork() == 0:\n    os.fork()\n    {sleeper(marker)}\ntime.sleep(60)\n"
    res, _, _ = run_watched(prog, marker, 2, timeout_s=3.0)
    assert res.status == "timeout"
    assert gone(marker), "a child or grandchild survived the timeout"


@pytest.mark.parametrize("timeout_s", [90.0, 3.0], ids=["program-exits", "program-times-out"])
def test_setsid_escapee_is_killed(timeout_s: float, shared_dir: Path) -> None:
    marker = uuid.uuid4().hex
    flag = shared_dir / "seen"
    # The child leaves the process group and session, then double-forks like a daemon; the parent exits once the
    # escapee runs (or sleeps into the timeout).
    then = wait_for_host(flag) if timeout_s > 5 else "time.sleep(60)\n"
    prog = (f"import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            f"        {sleeper(marker)}\n    os._exit(0)\n{then}")
    res, _, _ = run_watched(prog, marker, 1, flag, timeout_s=timeout_s)
    assert res.status == ("passed" if timeout_s > 5 else "timeout"), res.stderr
    assert "pidns" in res.isolation
    assert gone(marker), "a setsid() child escaped the sandbox"


def test_fork_bomb_ends_and_the_machine_stays_usable() -> None:
    from evalgate.core.sandbox import isolation

    # A real, recursive fork bomb that survives failed forks; run only where the process bound holds (an
    # unbounded one would take the machine down; test_fork_without_bound shows the bound on any checkout).
    assert "nproc" in isolation(), "no process bound here: install bubblewrap (docs/SANDBOX.md)"
    marker = uuid.uuid4().hex
    prog = (f"import os, sys\nif {marker!r} not in sys.argv:\n"
            f"    os.execv(sys.executable, [sys.executable, '-I', '-S', __file__, {marker!r}])\n"
            "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    t0 = time.monotonic()
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(res=run_code(prog, timeout_s=4.0)))
    t.start()
    peak = 0
    while t.is_alive():
        peak = max(peak, len(host_pids(marker)))
        time.sleep(0.05)
    assert box["res"].status in ("timeout", "error"), box["res"]
    assert time.monotonic() - t0 < 30  # ended by the 4 s timeout (slack for a loaded 2-core machine), not hung
    assert 1 < peak <= 16, f"{peak} bomb processes at once (bound: 16)"
    assert gone(marker)
    ok = run_code("print(sum(range(10)))\n", timeout_s=10.0)
    assert ok.status == "passed" and ok.wall_s < 10  # a normal program runs at once (seconds even under load)


# -- files and output -----------------------------------------------------------------------------------------------
@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the sandbox user (uid 65534 when the tests run as root) can write: tmp_path sits below a
    0700 directory."""
    d = Path(tempfile.mkdtemp(prefix="evalgate-sandbox-test-", dir="/tmp"))
    d.chmod(0o777)
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=False)


def test_host_files_cannot_be_deleted_or_written(shared_dir: Path) -> None:
    victim = shared_dir / "keep.txt"
    victim.write_text("precious")
    victim.chmod(0o666)
    # what a careless completion might do: delete a file, write beside it; its own directory stays writable
    new = shared_dir / "new.txt"
    prog = (f"import os\nopen('scratch.txt', 'w').write('own directory is writable')\n"
            f"for attempt in (lambda: os.remove({str(victim)!r}), lambda: open({str(new)!r}, 'w')):\n"
            "    try:\n        attempt()\n    except OSError as e:\n        assert e.errno in (2, 13, 30), e\n"
            "    else:\n        raise SystemExit('wrote outside its directory')\n")
    res = run_code(prog, timeout_s=10.0)
    assert res.status == "passed", res.stderr
    assert victim.read_text() == "precious" and not (shared_dir / "new.txt").exists()
    # the same program where the directory is declared writable does delete the file: the check above can fail
    assert run_code(prog, timeout_s=10.0, writable=[str(shared_dir)]).status == "failed"
    assert not victim.exists()


def test_run_many_keeps_order_and_uses_every_core(shared_dir: Path) -> None:
    from evalgate.core.sandbox import available_cores

    cores = available_cores()
    # Each program records when it ran; the spans overlap as many at a time as there are workers. A program does not
    # sleep a fixed time (a loaded machine can start the next one later than that): it stays until the programs of
    # its round (cores at a time, in order) have all started, or 30 s. A pool running fewer at once than there are
    # cores lets the spans overlap less; one running more, more.
    started = shared_dir / "started"
    started.mkdir()
    started.chmod(0o777)
    progs = [f"import os, time\nt = time.time()\nopen({str(started / str(i))!r}, 'w').close()\n"
             f"while len(os.listdir({str(started)!r})) < {min(2 * cores, cores * (i // cores + 1))} "
             f"and time.time() - t < 30:\n    time.sleep(0.02)\n"
             f"time.sleep(0.1)\n"
             f"open({str(shared_dir / str(i))!r}, 'w').write(f'{{t}} {{time.time()}}')\n"
             f"raise SystemExit({i % 2})\n"
             for i in range(2 * cores)]
    res = run_many(progs, writable=[str(shared_dir)])
    assert [r.status for r in res] == ["passed", "failed"] * cores
    spans = [tuple(map(float, (shared_dir / str(i)).read_text().split())) for i in range(2 * cores)]
    overlap = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert overlap == cores


def test_output_kept_per_sample_is_bounded() -> None:
    prog = "import sys\nsys.stderr.write('x' * (1 << 20))\nsys.stderr.write('\\nlast line')\nraise SystemExit(1)\n"
    res = run_code(prog, timeout_s=10.0)
    assert res.status == "failed"
    assert len(res.stderr.encode()) == 4096 and res.stderr.endswith("last line")
    assert run_code(prog, timeout_s=10.0, output_bytes=100).stderr == "x" * 90 + "\nlast line"


# -- strict isolation -----------------------------------------------------------------------------------------------
def _protocol(tmp_path: Path, isolation: str | None) -> Path:
    import yaml

    proto = yaml.safe_load((REPO / "protocols" / "humaneval-smoke.yaml").read_text())
    if isolation:
        proto.setdefault("execution", {})["isolation"] = isolation
    path = tmp_path / "he.yaml"
    path.write_text(yaml.safe_dump(proto))
    return path


def test_isolation_setting_changes_the_hash_only_when_strict(tmp_path: Path) -> None:
    import json

    from evalgate.protocol.spec import load_protocol

    lock = json.loads((REPO / "protocols" / "humaneval-smoke.yaml.lock").read_text())
    # a lock frozen before the setting existed still matches: the default is left out of the hash
    assert load_protocol(_protocol(tmp_path, None)).sha256 == lock["sha256"]
    assert load_protocol(_protocol(tmp_path, "best-effort")).sha256 == lock["sha256"]
    strict = load_protocol(_protocol(tmp_path, "strict"))
    assert strict.sha256 != lock["sha256"] and strict.resolved["execution"]["isolation"] == "strict"


def test_strict_scores_with_every_layer(tmp_path: Path, humaneval_records: list[dict]) -> None:
    from evalgate.protocol.spec import load_protocol
    from evalgate.scoring.base import SampleToScore, get_scorer

    scorer = get_scorer(load_protocol(_protocol(tmp_path, "strict")))
    rec = humaneval_records[0]
    [res] = scorer.score([SampleToScore(rec, rec["canonical_solution"], "", "stop")])
    assert res.status == "correct"
    assert res.detail == "[netns+pidns+minfs+rofs+unpriv+nouserns+nproc+stdlib]"
    assert scorer.sandbox["missing"] == []  # type: ignore[attr-defined]


def test_strict_refuses_without_bubblewrap_exit_2_before_any_read(tmp_path: Path, home: Path) -> None:
    from evalgate.datasets.humaneval import import_humaneval

    import_humaneval(store=Store())
    proto = _protocol(tmp_path, "strict")
    env = {**os.environ, "PATH": str(tmp_path / "empty")}  # no bwrap, unshare, setpriv or prlimit: no layer at all

    def evalgate(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "evalgate.cli", *args], capture_output=True, text=True,
                              env=env, cwd=REPO, timeout=300)

    assert evalgate("protocol", "freeze", str(proto)).returncode == 0
    r = evalgate("run", "--protocol", str(proto), "--checkpoint", str(tmp_path / "no-such-model"),
                 "--split", "humaneval-public")
    assert r.returncode == 2, r.stderr
    assert "execution.isolation is strict" in r.stderr
    assert "lacks netns, pidns, minfs, rofs, unpriv, nouserns, nproc, stdlib" in r.stderr and "bubblewrap" in r.stderr
    import duckdb

    con = duckdb.connect(str(home / "home" / "evalgate.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM access_log WHERE outcome <> 'added'").fetchone() == (0,)
    con.close()


# -- bounded file system, no nested namespaces (issue 27) ------------------------------------------------------------
FILL = """import os, sys
chunk = b"x" * (1 << 20)
wrote = {}
for d in ("/", "/etc", "/usr/bin", "/dev", "/proc", "/tmp", "/work", "/dev/shm"):
    n = 0
    for i in range(400):  # 400 MiB in files of 8 MiB, each under file_size_mb
        try:
            with open(os.path.join(d, f"fill{i}"), "wb") as f:
                for _ in range(8):
                    f.write(chunk)
                    n += 1
        except OSError:
            break
        if n >= 400:
            break
    wrote[d] = n
print(wrote, file=sys.stderr)
"""


def test_root_file_system_cannot_be_filled() -> None:
    """A program wrote 300 MiB to bubblewrap's root tmpfs (``/``, ``/etc``, ``/usr/bin``) where file_size_mb
    allowed 64 per tmpfs: now the root and ``/dev`` are read-only and every scratch tmpfs stops at 4 x 16 MiB."""
    res = run_code(FILL, timeout_s=60.0, file_size_mb=16)
    wrote = eval(res.stderr.strip().splitlines()[-1])  # noqa: S307 - the dict the program printed
    assert {d: wrote[d] for d in ("/", "/etc", "/usr/bin", "/dev", "/proc")} == dict.fromkeys(
        ("/", "/etc", "/usr/bin", "/dev", "/proc"), 0), wrote
    assert all(0 < wrote[d] <= 64 for d in ("/tmp", "/work", "/dev/shm")), wrote


NESTED = """import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
got = []
if libc.unshare(0x10000000) == 0:  # CLONE_NEWUSER: root with every capability in a namespace of its own
    got.append("user namespace")
    if libc.unshare(0x00020000) == 0:  # CLONE_NEWNS
        got.append("mount namespace")
os.makedirs("/tmp/mnt", exist_ok=True)
if libc.mount(b"none", b"/tmp/mnt", b"tmpfs", 0, b"") == 0:
    got.append("tmpfs without size")
    try:
        with open("/tmp/mnt/big", "wb") as f:
            f.write(b"x" * (100 << 20))
        got.append("wrote 100 MiB")
    except OSError as e:
        got.append(f"write: {e}")
print(got, file=sys.stderr)
"""


def test_nested_user_namespace_and_tmpfs_are_refused() -> None:
    """A program could ``unshare`` a user namespace (root with every capability inside) and mount a tmpfs of its
    own without a size bound; with ``nouserns`` (bwrap --disable-userns) and no capabilities it can do neither."""
    res = run_code(NESTED, timeout_s=30.0, file_size_mb=128, memory_mb=2048)
    assert res.status == "passed", res.stderr
    assert res.stderr.strip().splitlines()[-1] == "[]", res.stderr


def test_run_record_names_the_new_layers() -> None:
    from evalgate.core.sandbox import describe

    d = describe()
    assert {"rofs", "nouserns"} <= set(d["isolation"].split("+")), d
    # the whole-sandbox memory bound (cgroup v2) is not applied: the record says so, and why, rather than nothing
    assert d["memory"].startswith("per process (RLIMIT_AS) and sized tmpfs; no memcg: "), d
