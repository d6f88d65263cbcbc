#!/usr/bin/env bash
# Runs locktest's whole test suite: unit tests, checker tests on recorded and
# generated histories, and integration tests against real servers (run
# scripts/install.sh first). With a Docker engine it first builds the local
# server images the docker backend's tests use (no registry is needed: they
# come from Debian packages; cached in /var/cache/locktest).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
if docker info >/dev/null 2>&1; then
  ./scripts/build-images.sh
  export LOCKTEST_IMAGE_REDIS=${LOCKTEST_IMAGE_REDIS:-locktest/redis:bookworm}
  # docker-compose.yml stays valid (Debian ships compose v1 as docker-compose).
  if docker compose version >/dev/null 2>&1; then docker compose config -q; else docker-compose config -q; fi
fi
go test -race -timeout 20m ./...
