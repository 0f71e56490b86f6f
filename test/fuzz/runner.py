"""Run vtmlir's command-line tools on one input and classify what happened.

Each run is a child process with a time limit: either a fork of this (already warmed-up) process
that calls the tool's `main(argv)` (fast: vtmlir, torch-mlir and every pass module are imported
once), or a real `subprocess` of the console script (what a user runs). Both see the same argv,
stdin, stdout and stderr, and the child's exit status is the tool's.

Outcome kinds, in the order they are checked:
- `hang`: still running at the time limit (killed);
- `crash`: killed by a signal (SIGSEGV, SIGABRT, an OOM kill);
- `traceback`: a Python traceback on stderr (an exception escaped the tool);
- `internal`: the tool's own "internal error ... bug in vtmlir" line;
- `silent`: non-zero exit without an `error:` line, or a pass that "failed without reporting why";
- `error`: non-zero exit with an `error:` line (`located` says whether one has `file:line:col`);
- `ok`: exit status 0.
Only `ok` and `error` are acceptable answers to malformed input.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOLS = {"vt-opt": REPO / "tools" / "vt-opt", "vtmlir": REPO / "tools" / "vtmlir"}
FAILURE_KINDS = ("hang", "crash", "traceback", "internal", "silent")
# Memory a child may use: an input that needs more is refused or fails cleanly, never takes the machine.
CHILD_MEMORY_BYTES = 6 << 30

_ERROR_LINE = re.compile(r"(?m)^(?:\S+: )?(?:.*?: )?error: ")
_LOCATED = re.compile(r"(?m)^\S+:\d+:\d+: error: ")


@dataclass
class Outcome:
    kind: str
    returncode: int | None
    stderr: str
    seconds: float
    located: bool = False

    @property
    def failed(self) -> bool:
        return self.kind in FAILURE_KINDS

    def signature(self) -> str:
        """What identifies this failure's cause (for grouping): the kind and its key line."""
        text = self.stderr
        if self.kind == "traceback":
            lines = [ln for ln in text.strip().splitlines() if ln.strip()]
            frames = [ln.strip() for ln in lines if ln.strip().startswith("File ")]
            where = re.sub(r", line \d+", "", frames[-1]) if frames else ""
            return f"traceback: {lines[-1][:160] if lines else ''} @ {where}"
        if self.kind == "crash":
            tail = text.strip().splitlines()[-1][:160] if text.strip() else ""
            return f"crash: {self.returncode} {tail}"
        if self.kind == "internal":
            m = re.search(r"internal error: ([^\n]*)", text)
            return "internal: " + re.sub(r"\d+", "N", m.group(1)[:160] if m else "")
        if self.kind in ("error", "silent"):
            m = _ERROR_LINE.search(text)
            line = text[m.end():].split("\n", 1)[0] if m else text.strip()[:160]
            return f"{self.kind}: " + re.sub(r"'[^']*'|\d+", "_", line)[:160]
        return self.kind


def classify(returncode: int | None, signal_name: str | None, stderr: str, seconds: float,
             timed_out: bool) -> Outcome:
    if timed_out:
        return Outcome("hang", None, stderr, seconds)
    if signal_name is not None:
        return Outcome("crash", None, f"{signal_name}\n{stderr}", seconds)
    if "Traceback (most recent call last)" in stderr:
        return Outcome("traceback", returncode, stderr, seconds)
    if "internal error" in stderr:
        return Outcome("internal", returncode, stderr, seconds)
    if returncode == 0:
        return Outcome("ok", 0, stderr, seconds)
    if "without reporting why" in stderr or "without a diagnostic" in stderr or not _ERROR_LINE.search(stderr):
        return Outcome("silent", returncode, stderr, seconds)
    return Outcome("error", returncode, stderr, seconds, located=bool(_LOCATED.search(stderr)))


def _tool_main(tool: str):
    if tool == "vt-opt":
        from vtmlir.cli.vt_opt import main
    else:
        from vtmlir.cli.main import main
    return main


def warm_up(tools=("vt-opt", "vtmlir")) -> None:
    """Import what the tools import (and every pass module), so each forked run starts warm."""
    for tool in tools:
        _tool_main(tool)
    from vtmlir.passes import all_passes

    all_passes()
    if "vtmlir" in tools:
        import torch  # noqa: F401 - `vtmlir compile` of a zoo model imports it
        import vtmlir.backend.cpu  # noqa: F401


def run_tool(tool: str, argv: list[str], stdin: bytes = b"", timeout: float = 60.0,
             mode: str = "fork") -> Outcome:
    """Run `tool` (vt-opt or vtmlir) with `argv` and `stdin` in a child, in a temporary working
    directory (random pass options write report files); classify the result."""
    with tempfile.TemporaryDirectory(prefix="vtfuzz-") as tmp:
        paths = [os.path.join(tmp, n) for n in ("stdin", "stdout", "stderr")]
        Path(paths[0]).write_bytes(stdin)
        start = time.monotonic()
        if mode == "subprocess":
            rc, sig, timed_out = _run_subprocess(tool, argv, paths, timeout, tmp)
        else:
            rc, sig, timed_out = _run_forked(tool, argv, paths, timeout, tmp)
        seconds = time.monotonic() - start
        stderr = Path(paths[2]).read_bytes().decode(errors="replace")
    return classify(rc, sig, stderr, seconds, timed_out)


def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _run_subprocess(tool, argv, paths, timeout, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    env.pop("VTMLIR_DEBUG", None)
    with open(paths[0], "rb") as fin, open(paths[1], "wb") as fout, open(paths[2], "wb") as ferr:
        proc = subprocess.Popen([sys.executable, str(TOOLS[tool]), *argv], stdin=fin, stdout=fout,
                                stderr=ferr, env=env, preexec_fn=_limit_child, start_new_session=True, cwd=cwd)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, None, True
    if rc < 0:
        return None, signal.Signals(-rc).name, False
    return rc, None, False


def _run_forked(tool, argv, paths, timeout, cwd):
    main = _tool_main(tool)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import gc

            gc.disable()  # see vtmlir.crash_guard: never collect a context of the parent's here
            os.setsid()  # the tool's own children (crash guard) die with it on a timeout
            os.chdir(cwd)  # report files of random pass options (`report=bogus`) land in the temporary directory
            _limit_child()
            created = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            for fd, path, flags in ((0, paths[0], os.O_RDONLY), (1, paths[1], created), (2, paths[2], created)):
                f = os.open(path, flags, 0o644)
                os.dup2(f, fd)
                os.close(f)
            sys.stdin = open(0, "r", closefd=False)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            sys.argv = [tool, *argv]
            try:
                code = main(list(argv))
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            except BaseException:  # what the interpreter would print for an escaped exception
                import traceback

                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return None, None, True
        time.sleep(0.01)
    try:
        os.killpg(pid, signal.SIGKILL)  # anything the tool left running
    except (ProcessLookupError, PermissionError):
        pass
    if os.WIFSIGNALED(status):
        return None, signal.Signals(os.WTERMSIG(status)).name, False
    return os.WEXITSTATUS(status), None, False
