#!/usr/bin/env bash
# Builds the images the docker backend runs, from Debian packages, with no
# image registry: debootstrap of a minimal bookworm rootfs (cached), the
# server packages installed into a copy of it with apt (from the machine's
# own Debian mirror), then `docker import`. Run as root.
#
#   ./scripts/build-images.sh                 # every image below
#   ./scripts/build-images.sh redis mariadb   # only these
#
#   locktest/redis:bookworm      redis-server, redis-tools (redis-cli, for
#                                healthchecks), libfaketime (the clock shim);
#                                also runs redis-sentinel (redis-server --sentinel)
#   locktest/zookeeper:bookworm  ZooKeeper 3.8 (libzookeeper-java: the jars in
#                                /usr/share/java) on a headless JRE 17
#   locktest/etcd:bookworm       etcd and etcdctl 3.4
#   locktest/mariadb:bookworm    MariaDB 10.11: mariadbd, mariadb-install-db,
#                                the mariadb, mariadb-dump and mariadb-admin
#                                clients, and a mysql user
#   locktest/locktest:bookworm   locktest itself (bin/locktest, built when Go
#                                is here) with every server it starts and the
#                                tools of its faults (install.sh's packages but
#                                chromium and the Python clients), and
#                                campaigns/*.yaml in its working directory, so
#                                that any engine runs a shard of a campaign:
#                                docker run --privileged locktest/locktest:bookworm
#                                  campaign --config campaigns/nightly.yaml --shard 2/4
#                                (not built unless named: ./scripts/build-images.sh locktest)
#
# The docker backend's commands are written for these (Debian's paths).
# Use them with LOCKTEST_IMAGE_<KIND>=locktest/<kind>:bookworm (KIND redis,
# zookeeper, etcd, mariadb) or --image KIND=IMAGE.
#
# The rootfs and the package tree are cached in $LOCKTEST_IMAGE_CACHE
# (default /var/cache/locktest): a second build only re-imports, or does
# nothing when the image exists (FORCE=1 rebuilds it).
set -euo pipefail

CACHE=${LOCKTEST_IMAGE_CACHE:-/var/cache/locktest}
SUITE=bookworm
TAG=${LOCKTEST_IMAGE_TAG:-bookworm}
FORCE=${FORCE:-0}

if [ "$(id -u)" -ne 0 ]; then
  echo "build-images.sh: run as root (debootstrap and chroot need it)" >&2
  exit 2
fi
if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
  echo "build-images.sh: no Docker engine answers (docker info failed)" >&2
  exit 2
fi

# The mirror: $LOCKTEST_MIRROR, else the first Debian URI this machine uses.
mirror() {
  if [ -n "${LOCKTEST_MIRROR:-}" ]; then echo "$LOCKTEST_MIRROR"; return; fi
  local m
  m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
  if [ -z "$m" ]; then
    m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=$(mirror)

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "build-images.sh: installing debootstrap" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

mkdir -p "$CACHE"
BASE="$CACHE/rootfs-$SUITE-minbase"

# 1. The minimal rootfs, once.
if [ ! -e "$BASE/.locktest-done" ]; then
  rm -rf "$BASE"
  echo "debootstrap --variant=minbase $SUITE from $MIRROR" >&2
  t0=$(date +%s)
  debootstrap --variant=minbase "$SUITE" "$BASE" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 || {
    tail -20 "$CACHE/debootstrap.log" >&2
    exit 1
  }
  touch "$BASE/.locktest-done"
  echo "rootfs built in $(( $(date +%s) - t0 )) s" >&2
fi

# build_image NAME PACKAGES... : a copy of the rootfs with the packages, imported.
build_image() {
  local name=$1; shift
  local image="locktest/$name:$TAG"
  local tree="$CACHE/tree-$name-$SUITE"
  # locktest's image takes the binary of now: always imported again.
  if [ "$FORCE" != 1 ] && [ "$name" != locktest ] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "$image exists (FORCE=1 rebuilds it)" >&2
    return
  fi
  if [ "$FORCE" = 1 ] || [ ! -e "$tree/.locktest-done" ]; then
    local t0
    t0=$(date +%s)
    rm -rf "$tree"
    cp -a "$BASE" "$tree"
    rm -f "$tree/.locktest-done"
    # No service may start inside the chroot; apt reaches the mirror
    # through the host's network and resolver.
    printf '#!/bin/sh\nexit 101\n' >"$tree/usr/sbin/policy-rc.d"
    chmod +x "$tree/usr/sbin/policy-rc.d"
    cp /etc/resolv.conf "$tree/etc/resolv.conf"
    cat >"$tree/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
EOF
    cp -f /etc/apt/apt.conf.d/99artifact-registry "$tree/etc/apt/apt.conf.d/" 2>/dev/null || true
    mount -t proc proc "$tree/proc"
    trap 'umount "'"$tree"'/proc" 2>/dev/null || true' EXIT
    chroot "$tree" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    chroot "$tree" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    chroot "$tree" apt-get clean
    case $name in
      mariadb)
        # mariadb-server-core creates no account: the server drops to mysql.
        chroot "$tree" sh -c 'id mysql >/dev/null 2>&1 || useradd --system --user-group --no-create-home --home-dir /var/lib/mysql --shell /usr/sbin/nologin mysql'
        mkdir -p "$tree/var/lib/mysql" "$tree/run/mysqld"
        chroot "$tree" chown mysql:mysql /var/lib/mysql /run/mysqld
        ;;
    esac
    umount "$tree/proc"
    trap - EXIT
    rm -rf "$tree"/var/lib/apt/lists/* "$tree"/usr/share/doc/* "$tree"/usr/share/man/* \
      "$tree"/usr/share/locale/* "$tree/usr/sbin/policy-rc.d" "$tree"/var/log/*.log
    : >"$tree/etc/resolv.conf"
    touch "$tree/.locktest-done"
    echo "$name tree built in $(( $(date +%s) - t0 )) s" >&2
  fi
  local changes=()
  case $name in
    redis)
      mkdir -p "$tree/data"
      changes=(--change 'WORKDIR /data' --change 'EXPOSE 6379'
        --change 'CMD ["redis-server", "--protected-mode", "no", "--save", "", "--appendonly", "no"]')
      ;;
    zookeeper)
      mkdir -p "$tree/conf" "$tree/data"
      changes=(--change 'WORKDIR /data' --change 'EXPOSE 2181 2888 3888')
      ;;
    etcd)
      mkdir -p "$tree/data"
      changes=(--change 'WORKDIR /data' --change 'EXPOSE 2379 2380' --change 'CMD ["etcd"]')
      ;;
    mariadb)
      changes=(--change 'EXPOSE 3306')
      ;;
    locktest)
      install -D -m 0755 "$LOCKTEST_BIN" "$tree/usr/local/bin/locktest"
      rm -rf "$tree/locktest"
      mkdir -p "$tree/locktest/campaigns"
      cp campaigns/*.yaml "$tree/locktest/campaigns/"
      changes=(--change 'WORKDIR /locktest' --change 'ENV CI=true'
        --change 'ENTRYPOINT ["/usr/local/bin/locktest"]' --change 'CMD ["--help"]')
      ;;
  esac
  local old
  old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  tar -C "$tree" --numeric-owner --exclude=./.locktest-done -c . |
    docker import "${changes[@]}" \
      --change 'LABEL org.opencontainers.image.source=locktest-build-images' \
      - "$image" >/dev/null
  # A rebuild leaves the previous image untagged: remove it.
  if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
    docker rmi "$old" >/dev/null 2>&1 || true
  fi
  echo "built $image ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1/1e6}'))" >&2
}

# Small: no recommends, no docs; the ZooKeeper server jars without the
# zookeeper package (which pulls a full JRE with X11 for its scripts).
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(redis zookeeper etcd mariadb)
for w in "${want[@]}"; do
  case $w in
    redis) build_image redis redis-server redis-tools libfaketime ;;
    zookeeper) build_image zookeeper libzookeeper-java default-jre-headless ;;
    etcd) build_image etcd etcd-server etcd-client ;;
    mariadb) build_image mariadb mariadb-server-core mariadb-client ;;
    locktest)
      cd "$(dirname "$0")/.."
      LOCKTEST_BIN=${LOCKTEST_BIN:-bin/locktest}
      if command -v go >/dev/null 2>&1; then
        mkdir -p bin && go build -o bin/locktest ./cmd/locktest && LOCKTEST_BIN=bin/locktest
      fi
      if [ ! -x "$LOCKTEST_BIN" ]; then
        echo "build-images.sh: no locktest binary ($LOCKTEST_BIN): install Go or set LOCKTEST_BIN" >&2
        exit 2
      fi
      build_image locktest redis-server redis-sentinel redis-tools mariadb-server mariadb-client iproute2 iptables procps libfaketime zookeeper etcd-server etcd-client
      ;;
    *) echo "build-images.sh: unknown image $w (known: redis zookeeper etcd mariadb locktest)" >&2; exit 2 ;;
  esac
done
