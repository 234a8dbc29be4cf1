"""Reading a team's declared runtime dependencies for the Lambda bundle (no synth, no network)."""

from __future__ import annotations

import doctest

import pytest

from jobframework.cdk import dependencies
from jobframework.cdk.dependencies import find_dependency_file, read_dependency_file, runtime_requirements
from jobframework.errors import ConfigurationError


def test_the_module_example_runs():
    result = doctest.testmod(dependencies)
    assert result.attempted > 0 and result.failed == 0


def test_requirements_txt_wins_over_pyproject_and_follows_includes(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["idna"]\n')
    (tmp_path / "base.txt").write_text("# shared\nemail-validator>=2  # EmailStr\n")
    (tmp_path / "requirements.txt").write_text("-r base.txt\n\nboto3\nrequests==2.32.3\n")
    path = find_dependency_file(tmp_path)
    assert path == tmp_path / "requirements.txt"
    assert read_dependency_file(path) == ["email-validator>=2", "boto3", "requests==2.32.3"]
    assert runtime_requirements(read_dependency_file(path)) == ["email-validator>=2", "requests==2.32.3"]


def test_pyproject_dependencies_are_read_without_jobframework_and_what_lambda_provides(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["jobframework>=0.1", "pydantic>=2", "aws-lambda-powertools", '
        '"fastjsonschema", "idna>=3"]\n'
    )
    assert runtime_requirements(read_dependency_file(find_dependency_file(tmp_path))) == ["idna>=3"]


def test_no_dependency_file_means_no_dependencies(tmp_path):
    assert find_dependency_file(tmp_path) is None


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("requirements.txt", "--index-url https://x\n", r"requirements.txt:1: --index-url is not supported"),
        ("requirements.txt", "-r missing.txt\n", r"includes .*missing.txt, which does not exist"),
        (
            "pyproject.toml",
            '[project]\nname = "x"\ndynamic = ["dependencies"]\n',
            r"declares its dependencies dynamic: list them",
        ),
        ("pyproject.toml", "[project\n", r"is not valid TOML"),
    ],
)
def test_a_dependency_file_the_bundler_cannot_honour_is_refused_naming_the_file(
    tmp_path, name, text, message
):
    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigurationError, match=message):
        read_dependency_file(tmp_path / name)


def test_a_deploy_only_package_is_refused_with_where_to_move_it():
    with pytest.raises(ConfigurationError, match=r"pyproject.toml lists cdk-nag, .*optional-dependencies"):
        runtime_requirements(["cdk-nag>=2"], source="pyproject.toml")
