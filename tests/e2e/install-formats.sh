#!/usr/bin/env bash
# The real consumers of integrator's machine formats, pinned, into .e2e/formats/ (nothing
# is installed system-wide except npm when the machine has none):
#   - the SARIF Multitool (npm @microsoft/sarif-multitool, a self-contained native binary;
#     no .NET runtime needed) with a validation config that turns on every GitHub rule;
#   - promtool, extracted from Debian's prometheus package (apt-get download + dpkg-deb -x:
#     installing the package would pull in some 300 MB of JavaScript it does not need);
#   - systemd-analyze comes with systemd (.ci/debian-packages).
# A tool that cannot be fetched is recorded in .e2e/formats/<tool>.missing with the reason;
# tests/e2e/test_consumers.py then fails (never skips) and prints that reason.
set -uo pipefail
cd "$(dirname "$0")/../.."

SARIF_MULTITOOL_VERSION=5.7.0
PROMETHEUS_DEB_VERSION=2.42.0+ds-5+deb12u1

dest=.e2e/formats
mkdir -p "$dest"
rm -f "$dest"/*.missing

missing() { # tool, reason
    echo "e2e formats: cannot install $1: $2" >&2
    echo "$2" >"$dest/$1.missing"
}

as_root() { [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; }

# --- SARIF Multitool -------------------------------------------------------------------
install_multitool() {
    local prefix="$dest/npm" bin
    bin="$prefix/node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool"
    if ! [ -x "$bin" ] || ! "$bin" --version 2>&1 | grep -q "^SARIF Multitool $SARIF_MULTITOOL_VERSION"; then
        if ! command -v npm >/dev/null; then
            if as_root; then
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >&2 ||
                    { missing sarif-multitool "npm is not installed and apt-get install npm failed"; return; }
            else
                missing sarif-multitool "npm is not installed (and not root to install it)"
                return
            fi
        fi
        mkdir -p "$prefix"
        [ -e "$prefix/package.json" ] || echo '{"name": "integrator-e2e-formats", "private": true}' >"$prefix/package.json"
        if ! npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
            "@microsoft/sarif-multitool@$SARIF_MULTITOOL_VERSION" >&2; then
            missing sarif-multitool "npm install @microsoft/sarif-multitool@$SARIF_MULTITOOL_VERSION failed"
            return
        fi
        # The package's postinstall (chmod) may not run under npm's script policy.
        chmod a+x "$bin" 2>/dev/null || true
    fi
    if ! "$bin" --version >/dev/null 2>&1; then
        missing sarif-multitool "$bin does not run (see: $bin --version)"
        return
    fi
    # Every GitHub rule (GH1001-GH1007 are off by default) at level error, plus the SARIF
    # rules: export the default config and switch them on.
    local config="$dest/github-rules.xml"
    rm -f "$config"
    "$bin" export-validation-config "$config" >/dev/null 2>&1 ||
        { missing sarif-multitool "export-validation-config failed"; return; }
    python3 - "$config" <<'EOF' || { missing sarif-multitool "could not enable the GitHub rules in $config"; return; }
import re, sys
path = sys.argv[1]
text = open(path, encoding="utf-8").read()
kinds = re.search(r'(<Property Key="RuleKinds" Type="RuleKindSet">)(.*?)(</Property>)', text, re.S)
if kinds is None:
    sys.exit("no RuleKinds property")
items = kinds.group(2)
for kind in ("Sarif", "Ghas"):
    if f"<Item>{kind}</Item>" not in items:
        items += f"<Item>{kind}</Item>"
text = text[: kinds.start(2)] + items + text[kinds.end(2) :]
text, n = re.subn(
    r'(<Properties Key="GH\d+\.[^"]*\.Options">\s*<Property Key="RuleEnabled" Value=")Default(")',
    r"\1Error\2",
    text,
)
if n == 0:
    sys.exit("no GH rule options found")
open(path, "w", encoding="utf-8").write(text)
EOF
    echo "e2e formats: $("$bin" --version 2>&1 | head -1), config $config" >&2
}

# --- promtool --------------------------------------------------------------------------
install_promtool() {
    local root="$dest/prometheus" bin="$dest/prometheus/usr/bin/promtool"
    if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
        echo "e2e formats: $("$bin" --version 2>&1 | head -1)" >&2
        return
    fi
    if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
        missing promtool "needs apt-get and dpkg-deb (Debian) to fetch the prometheus package"
        return
    fi
    local work
    work="$(mktemp -d "$dest/deb.XXXXXX")"
    local apt=(apt-get -qq)
    # As root, apt-get download drops to the _apt user, who may not reach this folder.
    [ "$(id -u)" -eq 0 ] && apt+=(-o APT::Sandbox::User=root)
    # The pinned version first; a point release may have replaced it in the archive.
    if ! (cd "$work" && "${apt[@]}" download "prometheus=$PROMETHEUS_DEB_VERSION" >&2); then
        echo "e2e formats: prometheus=$PROMETHEUS_DEB_VERSION is not in the archive, taking the current one" >&2
        as_root && apt-get update -qq >&2
        if ! (cd "$work" && "${apt[@]}" download prometheus >&2); then
            rm -rf "$work"
            missing promtool "apt-get download prometheus failed (no package list? run apt-get update)"
            return
        fi
    fi
    rm -rf "$root"
    if ! dpkg-deb -x "$work"/prometheus_*.deb "$work/x"; then
        rm -rf "$work"
        missing promtool "dpkg-deb -x of the prometheus package failed"
        return
    fi
    mkdir -p "$root/usr/bin" # only promtool is kept (it needs nothing but libc)
    mv "$work/x/usr/bin/promtool" "$root/usr/bin/promtool"
    rm -rf "$work"
    if ! "$bin" --version >/dev/null 2>&1; then
        missing promtool "$bin does not run"
        return
    fi
    echo "e2e formats: $("$bin" --version 2>&1 | head -1)" >&2
}

# --- systemd-analyze -------------------------------------------------------------------
check_systemd_analyze() {
    if ! command -v systemd-analyze >/dev/null; then
        missing systemd-analyze "systemd-analyze is not installed (Debian package systemd, listed in .ci/debian-packages)"
        return
    fi
    echo "e2e formats: $(systemd-analyze --version | head -1)" >&2
}

install_multitool
install_promtool
check_systemd_analyze
exit 0
