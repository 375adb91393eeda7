#!/usr/bin/env bash
# Fetch the pinned third-party tools the end-to-end checks run (into .e2e/, not the
# system). Each tests/e2e/install-*.sh installs one group; all must succeed.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .e2e
for script in tests/e2e/install-*.sh; do
    [ -e "$script" ] || continue
    echo "e2e: $script" >&2
    bash "$script"
done
