#!/usr/bin/env bash
# The project's commands. Each one installs what it needs into .venv first (idempotent).
#
#   ./tasks.sh demo     the whole job lifecycle on the embedded AWS (no account needed)
#   ./tasks.sh test     lint, type-check and the full test suite (what CI runs)
#   ./tasks.sh bench    the benchmarks in bench/, printed as ratios
#   ./tasks.sh synth    synthesize the CDK app offline (npx cdk synth)
set -euo pipefail
cd "$(dirname "$0")"

export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-testing}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-testing}"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
export JSII_RUNTIME_PACKAGE_CACHE_ROOT="$PWD/.jsii-cache"
export PIP_DISABLE_PIP_VERSION_CHECK=1

setup() {
    local stamp=.venv/.installed
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "==> installing jobframework and its dev tools into .venv (first run takes a few minutes)" >&2
        python3 -m venv .venv
        .venv/bin/python -m pip install -q --upgrade pip >&2
        .venv/bin/python -m pip install -q -e ".[dev]" >&2
        touch "$stamp"
    fi
}

setup_node() {
    if [ -f package.json ] && [ ! -x node_modules/.bin/cdk ]; then
        echo "==> installing the CDK CLI (npm)" >&2
        npm install --no-audit --no-fund --loglevel=error >&2
    fi
}

cmd="${1:-help}"
shift || true
case "$cmd" in
    demo)
        setup
        exec .venv/bin/jf demo "$@"
        ;;
    test)
        setup
        echo "==> ruff" >&2
        .venv/bin/ruff check .
        .venv/bin/ruff format --check --quiet .
        echo "==> mypy" >&2
        .venv/bin/mypy
        echo "==> pytest" >&2
        exec .venv/bin/python -m pytest "$@"
        ;;
    bench)
        setup
        exec .venv/bin/python bench/run_all.py "$@"
        ;;
    synth)
        setup
        setup_node
        PATH="$PWD/.venv/bin:$PATH" exec npx cdk synth -q "$@"
        ;;
    *)
        sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
        [ "$cmd" = help ] || exit 2
        ;;
esac
