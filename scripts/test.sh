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
  export LOCKTEST_IMAGE_ZOOKEEPER=${LOCKTEST_IMAGE_ZOOKEEPER:-locktest/zookeeper:bookworm}
  export LOCKTEST_IMAGE_ETCD=${LOCKTEST_IMAGE_ETCD:-locktest/etcd:bookworm}
  export LOCKTEST_IMAGE_MARIADB=${LOCKTEST_IMAGE_MARIADB:-locktest/mariadb:bookworm}
  # docker-compose.yml stays valid, every profile (Debian ships compose v1 as docker-compose).
  if docker compose version >/dev/null 2>&1; then dc=(docker compose); else dc=(docker-compose); fi
  for p in "" redis redlock sentinel zk3 etcd3 mysql mysql-replicated; do
    "${dc[@]}" ${p:+--profile "$p"} config -q
  done
fi
# -count=1: the integration tests talk to real servers; a result from Go's test
# cache would say nothing about this machine.
# The longest packages are named first, longest first: go test runs up to
# GOMAXPROCS packages at once, starting them in the order given, so the
# harness's real-server tests (harness/integration ~335 s, harness ~270 s),
# cmd/locktest, checker, locks and the cluster packages start before the
# short ones (./... adds the rest) and no long package starts last. Not
# -p 3: idle it saved ~2 minutes, but beside two CPU hogs it starved the
# Sentinel, ZooKeeper and MariaDB cells (see docs/internals.md).
go test -race -count=1 -timeout 20m ./harness/integration ./harness ./cmd/locktest ./checker ./locks ./clusters/local ./clusters/docker ./campaigns ./reports ./...
