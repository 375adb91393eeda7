#!/usr/bin/env bash
# Buildbot (master, its web/REST service and worker, from PyPI) at pinned versions, with every dependency pinned
# too, in its own virtual environment .e2e/buildbot (nothing global): the CI engine
# tests/e2e/test_buildbot.py validates queue heads on. When it cannot be installed, the
# reason goes to .e2e/buildbot.missing and the test skips with it.
set -uo pipefail
cd "$(dirname "$0")/../.."
dest=.e2e/buildbot
stamp="$dest/.installed"
rm -f .e2e/buildbot.missing
pins="$(cat <<'PINS'
alembic==1.20.1
attrs==26.1.0
autobahn==26.11.1
Automat==25.4.16
buildbot==4.3.0
buildbot-worker==4.3.0
buildbot-www==4.3.0
cbor2==6.3.0
cffi==2.1.1
constantly==23.10.4
croniter==7.0.0
cryptography==50.0.2
hyperlink==21.0.0
idna==3.20
Incremental==24.11.0
Jinja2==3.1.6
Mako==1.4.3
MarkupSafe==3.0.4
msgpack==1.2.4
multipart==2.0.1
packaging==26.4
pycparser==3.12
PyJWT==2.15.1
pyOpenSSL==26.4.0
python-dateutil==4.0.0
PyYAML==6.0.4
service-identity==26.1.0
SQLAlchemy==2.1.9
treq==26.7.0
Twisted==26.10.0
txaio==26.6.1
typing_extensions==4.16.0
tzdata==2026.6
ujson==6.1.0
unidiff==1.0.1
zope.interface==8.7
PINS
)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pins" ] && "$dest/bin/buildbot" --version >/dev/null 2>&1; then
    exit 0
fi
missing() {
    echo "install-buildbot: $1" >&2
    echo "$1" >.e2e/buildbot.missing
    exit 0
}
rm -rf "$dest"
python3 -m venv "$dest" || missing "python3 -m venv $dest failed"
echo "$pins" >"$dest/constraints.txt"
"$dest/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c "$dest/constraints.txt" buildbot buildbot-worker buildbot-www >&2 ||
    missing "pip install buildbot buildbot-worker buildbot-www (pinned in tests/e2e/install-buildbot.sh) failed"
"$dest/bin/buildbot" --version >&2 || missing "$dest/bin/buildbot does not run"
"$dest/bin/buildbot-worker" --version >&2 || missing "$dest/bin/buildbot-worker does not run"
echo "$pins" >"$stamp"
