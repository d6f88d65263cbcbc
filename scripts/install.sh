#!/usr/bin/env bash
# Installs what locktest needs on Debian/Ubuntu (the servers it starts and the
# tools its faults use) and builds bin/locktest. Run as root (or with sudo).
# Installing the packages starts no service that locktest uses: every run
# starts its own servers on addresses it picks.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(redis-server redis-sentinel redis-tools mariadb-server mariadb-client iproute2 iptables procps libfaketime python3-redis python3-kazoo zookeeper etcd-server etcd-client chromium)

if [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (sudo $0) to install: ${PACKAGES[*]}" >&2
  exit 2
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null

# The Debian packages may start a system redis on port 6379 or a system
# MariaDB on port 3306; locktest never uses them and leaves them alone (every
# run initialises its own MariaDB datadirs with mariadb-install-db).

if ! command -v go >/dev/null 2>&1; then
  echo "install.sh: Go is not on PATH; install Go 1.24 or newer to build locktest" >&2
  exit 2
fi
mkdir -p bin
go build -o bin/locktest ./cmd/locktest
echo "installed: ${PACKAGES[*]}; built bin/locktest"
