#!/usr/bin/env bash
# Runs every test of strata. Installs what the tests need first (Debian, root).
set -euo pipefail
cd "$(dirname "$0")/.."
