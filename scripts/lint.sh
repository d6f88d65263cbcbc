#!/usr/bin/env bash
# Checks what every commit must pass besides the test suite (scripts/test.sh):
# gofmt, go vet and staticcheck. staticcheck is installed the first time, at
# the version pinned below, with go install (it needs the Go module proxy),
# into go env GOBIN (or GOPATH/bin), and run from there.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
staticcheck_version=v0.8.2
gobin=$(go env GOBIN)
if [ -z "$gobin" ]; then
  gobin="$(go env GOPATH)/bin"
fi
sc="$gobin/staticcheck"
if ! "$sc" -version 2>/dev/null | grep -qF "(${staticcheck_version#v})"; then
  (cd / && GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version")
fi
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "lint: not gofmt'ed (gofmt -w them):" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
"$sc" ./...
echo "lint: gofmt, go vet and staticcheck $staticcheck_version clean"
