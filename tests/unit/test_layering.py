"""Layering (issue 13, item 5): ``jobframework.core`` is the bottom layer and imports nothing of the
package, the names it holds keep their public homes, and no module of the package takes part in an
import cycle when it is imported (imports under ``if TYPE_CHECKING:`` and inside functions are made
later, so they do not count; the package's ``__init__``, which every import runs first, is left out)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import jobframework
from jobframework import core, errors, jobs

PACKAGE = Path(jobframework.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (``if TYPE_CHECKING:`` and function bodies too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


def test_core_imports_nothing_of_the_package() -> None:
    ours = {m for m in _imported_modules(PACKAGE / "core.py") if m.startswith(("jobframework", "."))}
    assert not ours, ours


def test_the_names_core_holds_keep_their_public_homes() -> None:
    assert jobs.Priority is core.Priority and jobs.lane_name is core.lane_name
    assert errors.ConfigurationError is core.ConfigurationError
    assert jobframework.ConfigurationError is core.ConfigurationError
    assert issubclass(errors.DuplicateJobError, core.ConfigurationError)
    # Tracebacks and reprs name the class where users import it from.
    assert errors.ConfigurationError.__module__ == "jobframework.errors"


def test_what_the_docs_write_without_an_import_is_the_packages() -> None:
    """README.md and docs/operating.md write ``batch=BatchOptions(...)``: a trial's
    ``from jobframework import BatchOptions`` raised ImportError."""
    from jobframework.job_options import BatchOptions

    assert jobframework.BatchOptions is BatchOptions and "BatchOptions" in jobframework.__all__


def test_every_name_the_testing_module_lists_is_there_to_annotate_a_test() -> None:
    """A trial found RuntimeConfig and RecordOutcome by reading the source, and jf_aws had no type."""
    from jobframework import testing
    from jobframework.delivery import RecordOutcome
    from jobframework.local.aws import EmbeddedAWS
    from jobframework.topology import RuntimeConfig

    assert all(hasattr(testing, name) for name in testing.__all__)
    assert (testing.EmbeddedAWS, testing.RuntimeConfig, testing.RecordOutcome) == (
        EmbeddedAWS,
        RuntimeConfig,
        RecordOutcome,
    )


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _load_time_imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports while it is being imported."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                subs = {f"{base}.{a.name}" for a in node.names} & modules
                found.update(subs or {base})
            elif isinstance(node, ast.If | ast.Try | ast.With):
                visit([*node.body, *getattr(node, "orelse", [])])
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text()).body)
    return {m for m in found if m in modules and m not in (name, "jobframework")}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph``, or ``[]``."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    state: dict[str, int] = {}
    path: list[str] = []

    def walk(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := walk(node)):
            return found
    return []


def test_no_module_of_the_package_is_in_an_import_cycle() -> None:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {name: _load_time_imports(path, set(paths)) for name, path in paths.items()}
    assert graph["jobframework.client"] >= {"jobframework.jobs", "jobframework.config"}  # it sees imports
    assert _cycle(graph) == [], " -> ".join(_cycle(graph))


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]


def test_the_lambda_entry_module_loads_no_boto3_at_cold_start():
    """boto3 (with s3transfer, ~80 ms) loads on the first AWS request, not with the consumer: a batch of
    untracked jobs makes none. A module that imports it at load time (e.g. boto3.dynamodb.types for
    item conversion) shows up here; bench/cold_start.py measures the cost."""
    import subprocess
    import sys

    code = (
        "import sys, jobframework.entrypoints.worker as w; w.lambda_handler._load_modules(); "
        "print(sorted(m for m in ('boto3', 's3transfer') if m in sys.modules))"
    )
    env = {"AWS_DEFAULT_REGION": "us-east-1", "JF_JOBS": "handlers.jobs", "PATH": "/usr/bin:/bin"}
    root = str(Path(__file__).parents[2])
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PYTHONPATH": root},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


NOOP_JOBS = """
from pydantic import BaseModel
from jobframework import job

class Ping(BaseModel):
    user_id: str

@job("layering.noop", idempotent=False)
def noop(ping: Ping) -> None:
    pass
"""

FIRST_EVENT = """
import io, json, sys, contextlib
import jobframework.entrypoints.worker as w

def record(n):
    body = json.dumps({"v": 1, "id": f"j-{n}", "type": "layering.noop", "payload": {"user_id": "u"},
                       "payload_version": 1, "key": f"j-{n}", "enqueued_at": "2026-01-01T00:00:00+00:00"})
    return {"messageId": f"m-{n}", "receiptHandle": f"r-{n}", "body": body, "messageAttributes": {},
            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1"},
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:layering-default"}

class Context:
    def get_remaining_time_in_millis(self):
        return 900_000

with contextlib.redirect_stdout(io.StringIO()):
    response = w.lambda_handler({"Records": [record(1), record(2)]}, Context())
print(response["batchItemFailures"], sorted(m for m in ("boto3", "s3transfer") if m in sys.modules),
      sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def test_a_first_batch_whose_jobs_all_succeed_loads_no_boto3(tmp_path: Path) -> None:
    """A cold start's first batch of lean jobs (untracked, not idempotent) that all succeed makes no AWS
    request, so it makes no client either, in a function configured as the construct deploys it (state
    and idempotency tables set). It made an SQS client for an empty visibility change, and a DynamoDB
    client for the stores it set up: ~0.1-0.3 s of boto3 on every cold start.

    Nor does it load OpenTelemetry (installed here, with the ``otel`` extra) when nothing in the
    function uses it: no provider can be recording then, and its propagators cost ~4 ms to load."""
    import os
    import subprocess
    import sys

    (tmp_path / "layering_jobs.py").write_text(NOOP_JOBS)
    env = {
        "AWS_DEFAULT_REGION": "us-east-1",
        "JF_JOBS": "layering_jobs",
        "PATH": "/usr/bin:/bin",
        "JF_QUEUE_URL_DEFAULT": "https://sqs.us-east-1.amazonaws.com/123456789012/layering-default",
        "JF_DLQ_URL_DEFAULT": "https://sqs.us-east-1.amazonaws.com/123456789012/layering-default-dlq",
        "JF_STATE_TABLE": "layering-state",
        "JF_IDEMPOTENCY_TABLE": "layering-idempotency",
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), str(tmp_path)]),
    }
    out = subprocess.run(
        [sys.executable, "-c", FIRST_EVENT], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "[] [] []"
