#!/usr/bin/env bash
# The agent CLIs tests/e2e/test_agents.py drives, at pinned versions, from npm into
# .e2e/agents (nothing global). They talk only to a scripted model server on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null; then
    echo "install-agents: npm is missing (Debian package nodejs)" >&2
    exit 1
fi
packages="@anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @google/gemini-cli@0.61.0"
dest=.e2e/agents
stamp="$dest/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$packages" ]; then
    exit 0
fi
mkdir -p "$dest"
if [ ! -f "$dest/package.json" ]; then
    echo '{"name": "integrator-e2e-agents", "private": true}' > "$dest/package.json"
fi
# shellcheck disable=SC2086  # one word per package
(cd "$dest" && npm install --no-audit --no-fund --save-exact --loglevel=error $packages)
for bin in claude codex gemini; do
    "$dest/node_modules/.bin/$bin" --version >/dev/null
done
echo "$packages" > "$stamp"
