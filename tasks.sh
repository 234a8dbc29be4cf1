#!/usr/bin/env bash
# The project's commands. Each one installs what it needs into .venv first (idempotent): the demo
# only its own dependencies, the others the whole dev toolchain.
#
#   ./tasks.sh demo     the whole job lifecycle on the embedded AWS (no account needed)
#   ./tasks.sh test     lint, type-check and the full test suite in two workers (what CI runs)
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

# What .venv holds is written in its stamp: "local" (the demo's dependencies, the `local` extra) or
# "dev" (everything: the toolchain, CDK, the benchmarks' peers). An empty stamp, as older versions of
# this script and the contributors' notes write after a dev install, counts as "dev". A stamp older
# than pyproject.toml counts as nothing.
installed() {
    local stamp=.venv/.installed
    if [ -f "$stamp" ] && [ -x .venv/bin/python ] && [ ! pyproject.toml -nt "$stamp" ]; then
        local have
        have="$(cat "$stamp")"
        echo "${have:-dev}"
    fi
}

# uv (https://docs.astral.sh/uv/) installs several times faster than pip: the one on PATH, else the
# one in python3, else one bootstrapped into .venv with pip. Prints the command, or nothing.
find_uv() {
    if command -v uv > /dev/null 2>&1; then
        echo uv
    elif python3 -m uv --version > /dev/null 2>&1; then
        echo "python3 -m uv"
    elif [ -x .venv/bin/uv ]; then
        echo .venv/bin/uv
    fi
}

setup() {  # setup local|dev: make sure .venv holds at least that set
    local want="$1" have uv
    have="$(installed)"
    if [ "$have" = dev ] || [ "$have" = "$want" ]; then
        return
    fi
    if [ "$want" = dev ]; then
        echo "==> installing jobframework and its dev tools into .venv (about a minute the first time)" >&2
    else
        echo "==> installing what the demo needs into .venv (under a minute the first time)" >&2
    fi
    uv="$(find_uv)"
    if [ -z "$uv" ]; then
        [ -x .venv/bin/python ] || python3 -m venv .venv
        if .venv/bin/python -m pip install -q uv >&2; then
            uv=.venv/bin/uv
        fi
    fi
    if [ -n "$uv" ]; then
        # --seed: the venv gets pip too, for the tools that call `python -m pip`.
        [ -x .venv/bin/python ] || $uv venv -q --seed .venv >&2
        $uv pip install -q --python .venv/bin/python -e ".[$want]" >&2
    else
        echo "==> uv is not available here; installing with pip (slower)" >&2
        .venv/bin/python -m pip install -q -e ".[$want]" >&2
    fi
    echo "$want" > .venv/.installed
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
        setup local
        exec .venv/bin/jf demo "$@"
        ;;
    test)
        setup dev
        echo "==> ruff" >&2
        .venv/bin/ruff check .
        .venv/bin/ruff format --check --quiet .
        echo "==> mypy" >&2
        .venv/bin/mypy
        echo "==> pytest" >&2
        if [ $# -eq 0 ]; then
            # The whole suite in two pytest-xdist workers (each with its own embedded AWS): about 11
            # minutes on a 2-core machine, where one took 20. Arguments (a file, -k, -n 1) run as given.
            set -- -n 2
        fi
        exec .venv/bin/python -m pytest "$@"
        ;;
    bench)
        setup dev
        exec .venv/bin/python bench/run_all.py "$@"
        ;;
    synth)
        setup dev
        setup_node
        PATH="$PWD/.venv/bin:$PATH" exec npx cdk synth -q "$@"
        ;;
    *)
        sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
        [ "$cmd" = help ] || exit 2
        ;;
esac
