#!/usr/bin/env bash
# Installs what rampart's tests and perf lab need, if missing. Debian 12.
# Usage: hack/deps.sh [test|perf|gen|images|all]   (default: test; gen: what hack/gen-bpf.sh needs)
set -euo pipefail
what=${1:-test}

need=()
want() { # want <command> <debian package>
  command -v "$1" >/dev/null 2>&1 || need+=("$2")
}

case "$what" in
  test|all)
    want curl curl
    want openssl openssl
    want redis-server redis-server
    want bird bird2
    want ip iproute2
    # control/server's TestDashboardInBrowser drives the operator page in it (chromedp).
    [ -x /usr/bin/chromium ] || need+=(chromium)
    # Debian keeps PostgreSQL's server binaries off PATH.
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null || need+=(postgresql)
    ;;&
  images|test|all)
    # images/deb's tests: systemd-analyze verify/security, dpkg-deb, a debootstrap
    # chroot booted with systemd-nspawn, the agent under setpriv/prlimit/nsenter in a namespace.
    want debootstrap debootstrap
    want systemd-analyze systemd
    want dpkg-deb dpkg
    want systemd-nspawn systemd-container
    want setpriv util-linux
    want ip iproute2
    ;;&
  images|all)
    # make image (a raw disk with extlinux) and make image-test (a qemu boot); not needed by make test.
    want sfdisk fdisk
    want mkfs.ext4 e2fsprogs
    want losetup mount
    want extlinux extlinux
    [ -f /usr/lib/syslinux/mbr/mbr.bin ] || need+=(syslinux-common)
    want qemu-system-x86_64 qemu-system-x86
    ;;&
  perf|test|all) # test: TestQuickReport (perf/report) runs the quick perf suite
    want curl curl
    want openssl openssl
    want nginx nginx-light
    want wrk wrk
    want h2load nghttp2-client
    want haproxy haproxy
    want taskset util-linux
    ;;
  test|images) ;;
  gen)
    want clang clang
    want llvm-strip llvm
    [ -f /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
    ;;
  *) echo "usage: $0 [test|perf|gen|images|all]" >&2; exit 2 ;;
esac

if ((${#need[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "hack/deps.sh: missing ${need[*]}; run as root (or: sudo apt-get install ${need[*]})" >&2
    exit 1
  fi
  echo "hack/deps.sh: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || true
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
