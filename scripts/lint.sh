#!/usr/bin/env bash
# Checks what every commit must pass besides the test suite (scripts/test.sh):
# gofmt, go vet and staticcheck. staticcheck is installed the first time, at
# the version pinned below, with go install (it needs the Go module proxy).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
export PATH="$PATH:$(go env GOPATH)/bin"
staticcheck_version=v0.8.2
if ! staticcheck -version 2>/dev/null | grep -q "${staticcheck_version#v}"; then
  (cd / && GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version")
fi
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "lint: not gofmt'ed (gofmt -w them):" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
staticcheck ./...
echo "lint: gofmt, go vet and staticcheck $staticcheck_version clean"
