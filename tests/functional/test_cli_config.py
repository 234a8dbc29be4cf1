"""`jf config`: which deployment the other commands read, and from where."""

from __future__ import annotations

import json

from jobframework.local.aws import FAKE_CREDENTIALS
from tests.functional.conftest_local import cli_env, example_jobs_config, invoke, jf_aws

__all__ = ["example_jobs_config", "jf_aws"]  # (jf_config: the example jobs' topology, with a catalog)


def test_it_shows_the_queues_and_tables_read_from_the_variables(jf_config):
    shown = invoke(["config"], cli_env(jf_config))
    assert shown.exit_code == 0, shown.output
    assert "read from:          JF_* variables" in shown.stdout
    assert f"state table:        {jf_config.state_table}" in shown.stdout
    assert f"endpoint:           {jf_config.endpoint_url}" in shown.stdout
    assert "job modules:        handlers.jobs (from JF_JOBS)" in shown.stdout
    for ep in jf_config.queues.values():
        assert ep.dlq_url in shown.stdout
    data = json.loads(invoke(["config", "--json"], cli_env(jf_config)).stdout)
    lanes = jf_config.queues.items()
    assert data["queues"] == {lane: {"queue": ep.url, "dlq": ep.dlq_url} for lane, ep in lanes}
    assert data["catalog_jobs"] == []  # (the variables name no parameter here: no catalog to read)
    # jf dev's exports carry both: the queues' variables and the parameter, where the catalog is
    exported = {**cli_env(jf_config), "JF_TOPOLOGY_PARAMETER": str(jf_config.topology_parameter)}
    both = json.loads(invoke(["config", "--json"], exported).stdout)
    assert both["source"] == "JF_* variables" and both["catalog_jobs"] == sorted(jf_config.jobs)
    # A queue variable without its DLQ's is no lane: from_env reads the parameter, and says so
    half = {k: v for k, v in exported.items() if not k.startswith(("JF_QUEUE_URL_", "JF_DLQ_URL_"))}
    half["JF_QUEUE_URL_HIGH"] = "http://x/q"
    assert json.loads(invoke(["config", "--json"], half).stdout)["source"].startswith("SSM parameter ")


def test_it_says_it_read_the_topology_parameter_and_its_catalog(jf_config):
    env = {
        **FAKE_CREDENTIALS,
        "JF_ENDPOINT_URL": str(jf_config.endpoint_url),
        "JF_TOPOLOGY_PARAMETER": str(jf_config.topology_parameter),
        "JF_JOBS": "",
    }
    data = json.loads(invoke(["config", "--json"], env).stdout)
    assert data["source"] == f"SSM parameter {jf_config.topology_parameter}"
    assert data["catalog_jobs"] == sorted(jf_config.jobs) and data["catalog_jobs"]
    assert data["state_table"] == jf_config.state_table
    shown = invoke(["config"], env)
    assert f"{len(jf_config.jobs)} job(s)" in shown.stdout
    assert "job modules:        none named (jf dev and jf worker take --jobs" in shown.stdout
    signed = json.loads(invoke(["config", "--json"], {**env, "JF_SIGNING_KEYS": "ssm:/k"}).stdout)
    assert signed["source"] == f"SSM parameter {jf_config.topology_parameter} (JF_SIGNING_KEYS over it)"
    assert signed["signing_keys"] == "ssm:/k"


def test_a_bad_project_file_is_said_and_the_rest_shown(jf_config, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.jobframework]\njobs = "not a list"\n')
    monkeypatch.chdir(tmp_path)
    shown = invoke(["config"], {**cli_env(jf_config), "JF_JOBS": ""})
    assert shown.exit_code == 0, shown.output
    assert "job modules:        not read:" in shown.stdout and "pyproject.toml" in shown.stdout
    assert f"state table:        {jf_config.state_table}" in shown.stdout


def test_no_configuration_says_what_to_set(tmp_path):
    env = {**FAKE_CREDENTIALS, "JF_ENDPOINT_URL": "http://127.0.0.1:9", "JF_TOPOLOGY_PARAMETER": ""}
    shown = invoke(["config"], env)
    assert shown.exit_code != 0
    assert "jf: error:" in shown.output
