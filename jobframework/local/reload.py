"""``jf dev --reload``: the workers and the scheduler restart with your code when a source file changes.

The embedded AWS runs in the ``jf dev`` process and stays, so queues, dead letters, job statuses and
delayed jobs outlive a reload; the workers and the scheduler run in a child ``jf dev --attached`` on
its port, which is stopped (drained, as Ctrl-C drains) and started again. As ``uvicorn --reload``
does, the ``.py`` files under the current directory are watched, and those of the job modules'
packages where they lie elsewhere; they are polled (a stat a file each half second), so nothing is
needed beyond the standard library. A child that cannot load your jobs (a syntax error) is waited out: the
next change starts it again.
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

POLL_SECONDS = 0.5
SETTLE_SECONDS = 0.3
"""After a change, how long to wait for an editor's other writes before restarting."""
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "cdk.out", "site-packages", "build", "dist"})
"""Directories never watched (with those whose name starts with a dot, and virtual environments)."""
DEFAULT_EXCLUDES = ("tests/*", "test_*.py", "*_test.py", "conftest.py")
"""Files whose change reloads nothing unless ``--reload-exclude ''`` clears these: tests (a test saved
while ``jf dev --reload`` ran had restarted the workers)."""


def source_roots(modules: Sequence[str], cwd: Path) -> list[Path]:
    """The directories (or files) to watch: ``cwd``, and each job module's top-level package (or
    module file) that is not under it. Found without importing them.

    Example:
        >>> roots = source_roots(["json.decoder"], Path("/nowhere"))
        >>> roots == [Path("/nowhere"), Path(json.__file__).parent.resolve()]
        True
    """
    roots = [cwd.resolve()]
    for name in modules:
        try:
            spec = importlib.util.find_spec(name.split(".")[0])
        except (ImportError, ValueError):
            continue  # the child says what is wrong with it
        if spec is None:
            continue
        if spec.submodule_search_locations:
            places = [Path(p) for p in spec.submodule_search_locations]
        elif spec.origin and spec.origin.endswith(".py"):
            places = [Path(spec.origin)]
        else:
            continue
        for place in (p.resolve() for p in places):
            if not any(place == root or root in place.parents for root in roots if root.is_dir()):
                roots.append(place)
    return roots


def _skipped(entry: os.DirEntry[str]) -> bool:
    return (
        entry.name.startswith(".")
        or entry.name in SKIPPED_DIRS
        or os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))  # a virtual environment
    )


def _scan(roots: Iterable[Path]) -> dict[str, int]:
    """Each ``.py`` file under ``roots`` and its modification time (ns)."""
    found: dict[str, int] = {}
    pending = [str(r) for r in roots]
    while pending:
        place = pending.pop()
        if place.endswith(".py") and os.path.isfile(place):
            with contextlib.suppress(OSError):
                found[place] = os.stat(place).st_mtime_ns
            continue
        try:
            with os.scandir(place) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if not _skipped(entry):
                            pending.append(entry.path)
                    elif entry.name.endswith(".py"):
                        # (gone between the listing and the stat: the next scan says so)
                        with contextlib.suppress(OSError):
                            found[entry.path] = entry.stat().st_mtime_ns
        except OSError:
            continue
    return found


def excluded(path: str, patterns: Sequence[str]) -> bool:
    """Whether a file (its path from the watched root, with ``/``) matches one of the ``patterns``
    (``fnmatch``): one without a ``/`` its name, one with a ``/`` its path from any of its directories
    down (``*`` crossing ``/``: ``tests/*`` is every file under a ``tests`` directory, at any depth).

    Example:
        >>> excluded("app/tests/unit/x.py", ["tests/*"]), excluded("app/jobs.py", ["tests/*"])
        (True, False)
        >>> excluded("test_app/jobs.py", ["test_*.py"]), excluded("app/test_x.py", ["test_*.py"])
        (False, True)
    """
    parts = Path(path).parts
    for pattern in patterns:
        if "/" not in pattern:
            if fnmatch.fnmatchcase(parts[-1], pattern):
                return True
        elif any(fnmatch.fnmatchcase("/".join(parts[i:]), pattern) for i in range(len(parts))):
            return True
    return False


class SourceWatch:
    """The ``.py`` files under some roots, polled, less those matching ``exclude``: :meth:`changed`
    names those added, changed or removed since the last call."""

    def __init__(
        self, roots: Sequence[Path], exclude: Sequence[str] = DEFAULT_EXCLUDES, keep: Sequence[str] = ()
    ) -> None:
        """``keep``: the job modules (``app.jobs``), whose files are watched whatever ``exclude`` says
        (a job module under ``tests/`` reloads)."""
        self.roots = list(roots)
        # ("scripts/" and "scripts/*" alike: every file under it)
        self.exclude = [p + "*" if p.endswith("/") else p for p in exclude if p]
        self.keep = [name.replace(".", "/") for name in keep]
        self._seen = self._scan()

    def __len__(self) -> int:
        return len(self._seen)

    def _scan(self) -> dict[str, int]:
        found = _scan(self.roots)
        if not self.exclude:
            return found
        return {k: v for k, v in found.items() if not self._excluded(self._relative(k))}

    def _excluded(self, relative: str) -> bool:
        if any(relative == f"{m}.py" or relative.startswith(f"{m}/") for m in self.keep):
            return False
        return excluded(relative, self.exclude)

    def _relative(self, path: str) -> str:
        """``path`` from the root it lies under, with ``/`` (a pattern never matches the root's own
        directories)."""
        for root in self.roots:
            try:
                return Path(path).relative_to(root).as_posix()
            except ValueError:
                continue
        return os.path.basename(path)

    def changed(self) -> list[str]:
        now = self._scan()
        before, self._seen = self._seen, now
        return sorted(p for p in before.keys() | now.keys() if before.get(p) != now.get(p))


def without_options(args: Sequence[str], flags: Iterable[str], valued: Iterable[str]) -> list[str]:
    """``args`` less the ``flags`` and the ``valued`` options with their values (``--port 1``,
    ``--port=1``).

    Example:
        >>> without_options(["dev", "--reload", "--port", "4566", "--app=x", "--jobs", "a"],
        ...                 ["--reload"], ["--port", "--app"])
        ['dev', '--jobs', 'a']
    """
    flags, valued = set(flags), set(valued)
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in flags or ("=" in arg and arg.split("=", 1)[0] in valued):
            continue
        elif arg in valued:
            skip = True
        else:
            kept.append(arg)
    return kept


def _relative(path: str, cwd: Path) -> str:
    try:
        return str(Path(path).relative_to(cwd))
    except ValueError:
        return path


class Supervisor:
    """Runs ``command`` as a child (in a session of its own, so that Ctrl-C reaches this process
    only) and restarts it when ``watch`` sees a change, until SIGTERM or SIGINT; each stop of the
    child is a SIGTERM and a wait for its drain.

    ``say(text, event)`` prints a line of its own: the text, or with ``--json`` the event.
    """

    def __init__(
        self,
        command: Callable[[int], list[str]],
        watch: SourceWatch,
        say: Callable[[str, dict[str, object]], None],
        *,
        drain_timeout: float,
        cwd: Path,
        counts: Path | None = None,
    ) -> None:
        self.command, self.watch, self.say = command, watch, say
        self.drain_timeout, self.cwd, self.counts = drain_timeout, cwd, counts
        self.reloads = 0
        from jobframework.local.tally import no_counts

        self.totals = no_counts()
        """The children's counts summed (records, batches, jobs by outcome), read from ``counts``."""
        self._stop = threading.Event()

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.command(self.reloads), start_new_session=True)

    def _halt(self, child: subprocess.Popen[bytes]) -> int:
        """Stop ``child`` as Ctrl-C stops ``jf dev`` (it drains); its exit code."""
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
        try:
            code = child.wait(timeout=self.drain_timeout + 15)
        except subprocess.TimeoutExpired:
            child.kill()
            code = child.wait()
        self._add_counts()
        return code

    def _add_counts(self) -> None:
        """Add what the stopped child counted (its ``--counts-file``; none: it did not start polling)."""
        from jobframework.local.tally import add_counts, read_counts

        counts = read_counts(self.counts) if self.counts is not None else None
        if counts is not None and self.counts is not None:
            self.counts.unlink(missing_ok=True)
            add_counts(self.totals, counts)

    def run(self) -> int:
        """Until a signal; the exit code of the last child's stop."""

        def handle(signum: int, frame: object) -> None:
            self._stop.set()

        # (SIGHUP: the terminal closed; left to its default, this process died and its workers polled
        # an embedded AWS that was gone)
        stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        previous = {sig: signal.signal(sig, handle) for sig in stops}
        child = self._start()
        waiting = False
        try:
            while not self._stop.wait(POLL_SECONDS):
                changed = self.watch.changed()
                if changed:
                    self._stop.wait(SETTLE_SECONDS)  # an editor's or a checkout's other writes
                    changed = sorted({*changed, *self.watch.changed()})
                if child.poll() is not None and not waiting and not changed:
                    waiting = True
                    self.say(
                        f"jf dev: the workers stopped (exit {child.returncode}); they start again when "
                        "you change a source file (Ctrl-C stops jf dev)",
                        {"event": "waiting", "exit": child.returncode},
                    )
                if not changed or self._stop.is_set():
                    continue
                shown = [_relative(p, self.cwd) for p in changed]
                self.say(
                    f"jf dev: reloading: {', '.join(shown[:5])}"
                    + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
                    + " changed",
                    {"event": "reloading", "changed": shown},
                )
                self._halt(child)
                if self._stop.is_set():  # (Ctrl-C while it drained: no new workers)
                    return 0
                self.reloads += 1
                child, waiting = self._start(), False
            code = self._halt(child)
            # Stopped by us: clean, also when it died of the SIGTERM before it set its handler; a child
            # that had failed already (a module that did not load) was said when it failed.
            return 0 if waiting or code in (0, -signal.SIGTERM) else code
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)


def say_line(json_lines: bool) -> Callable[[str, dict[str, object]], None]:
    """How the supervisor prints: a text line, or with ``--json`` a JSON object (flushed at once: the
    child writes to the same stdout)."""

    def say(text: str, event: dict[str, object]) -> None:
        print(json.dumps(event) if json_lines else text, flush=True)

    return say


def child_command(args: Sequence[str], port: int, counts: Path | None = None) -> Callable[[int], list[str]]:
    """The child's command line: this ``jf dev``'s arguments on the embedded AWS's ``port`` (writing
    its counts to ``counts`` when it stops)."""
    kept = without_options(args, ["--reload"], ["--port", "--reloaded", "--reload-exclude", "--counts-file"])

    def command(reloads: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "jobframework.cli",
            *kept,
            "--port",
            str(port),
            "--attached",
            "--reloaded",
            str(reloads),
            *(("--counts-file", str(counts)) if counts is not None else ()),
        ]

    return command


def exit_with_parent() -> None:
    """In the child: SIGTERM itself (a drain) once its parent is gone (``jf dev`` killed outright),
    so that no workers poll an embedded AWS that went with it (within a fifth of a second)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(0.2)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="jf-dev-parent", daemon=True).start()


def lanes_note(before: Iterable[str] | None, env: dict[str, str], lanes: Iterable[str]) -> list[str]:
    """What a reload that changed the lanes (a job's new ``profile=``) prints: the ``export`` lines
    again, since those printed at the start name the old ones (``[]`` when the lanes are the same).

    Example:
        >>> lanes_note(["default"], {"JF_QUEUE_URL_DEFAULT_IO": "u"}, ["default", "default-io"])
        ['# the lanes changed (now default, default-io): export these again in other shells:', 'export JF_QUEUE_URL_DEFAULT_IO=u']
    """  # noqa: E501
    now = sorted(lanes)
    if before is None or sorted(before) == now:
        return []
    head = f"# the lanes changed (now {', '.join(now)}): export these again in other shells:"
    return [head, *(f"export {name}={value}" for name, value in env.items())]
