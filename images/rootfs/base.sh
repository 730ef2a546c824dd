#!/usr/bin/env bash
# Builds (or reuses) the cached Debian base tree for the image and prints its path.
# Usage: images/rootfs/base.sh
# The tree is kept under $RAMPART_IMAGE_CACHE (default /var/cache/rampart-images), keyed by
# suite, architecture, mirror and package list, so a second build skips debootstrap. A missing
# or half-written cache entry is rebuilt from scratch. Needs root and debootstrap.
set -euo pipefail

suite=${SUITE:-bookworm}
arch=${ARCH:-amd64}
mirror=${MIRROR:-http://deb.debian.org/debian}
cache=${RAMPART_IMAGE_CACHE:-/var/cache/rampart-images}
# What the node needs besides minbase: systemd as init, udev for the disk and NIC, iproute2 for
# VIPs, kmod, ca-certificates for the control plane's TLS, initramfs-tools for the kernel.
packages=(initramfs-tools systemd systemd-sysv udev dbus kmod iproute2 ca-certificates adduser)
# The kernel comes from bookworm-backports (6.12 on 2026-12-02), the newest verifier Debian 12
# has; KERNEL_SUITE=bookworm takes the stock 6.1. Both still refuse rampart's XDP program at the
# IPv6 payload length check (images/rootfs/README.md, "Known failure").
kernel_suite=${KERNEL_SUITE:-$suite-backports}

key=$(printf '%s\n' "$suite" "$arch" "$mirror" "$kernel_suite" "${packages[@]}" | sha256sum | cut -c1-16)
dir=$cache/base-$suite-$arch-$key
if [ -f "$dir/.rampart-base-complete" ]; then
  echo "$dir"
  exit 0
fi

command -v debootstrap >/dev/null || { echo "base.sh: debootstrap missing (hack/deps.sh images)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "base.sh: debootstrap needs root" >&2; exit 1; }
rm -rf "$dir" "$dir.tmp"
mkdir -p "$cache"
incl=$(IFS=,; echo "${packages[*]}")
echo "base.sh: debootstrap $suite/$arch from $mirror into $dir (several minutes)" >&2
if ! debootstrap --variant=minbase --arch="$arch" --include="$incl" "$suite" "$dir.tmp" "$mirror" >"$cache/debootstrap-$key.log" 2>&1; then
  echo "base.sh: debootstrap failed; last lines of $cache/debootstrap-$key.log:" >&2
  tail -20 "$cache/debootstrap-$key.log" >&2
  exit 1
fi
# Security updates and the kernel, with apt inside the tree.
cat >"$dir.tmp/etc/apt/sources.list" <<SRC
deb $mirror $suite main
deb $mirror $suite-updates main
deb http://deb.debian.org/debian-security $suite-security main
SRC
[ "$kernel_suite" = "$suite" ] || echo "deb $mirror $kernel_suite main" >>"$dir.tmp/etc/apt/sources.list"
cp /etc/resolv.conf "$dir.tmp/etc/resolv.conf"
mount -t proc proc "$dir.tmp/proc"
trap 'umount "$dir.tmp/proc" 2>/dev/null || true' EXIT
in_tree() { chroot "$dir.tmp" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
if ! { in_tree apt-get -qq update && in_tree apt-get -y -qq upgrade &&
       in_tree apt-get -y -qq --no-install-recommends -t "$kernel_suite" install linux-image-amd64; } \
     >>"$cache/debootstrap-$key.log" 2>&1; then
  echo "base.sh: apt in the tree failed (updates, kernel from $kernel_suite); last lines of $cache/debootstrap-$key.log:" >&2
  tail -20 "$cache/debootstrap-$key.log" >&2
  exit 1
fi
umount "$dir.tmp/proc"
trap - EXIT
: >"$dir.tmp/etc/resolv.conf"
# Downloaded packages are not part of the image.
rm -rf "$dir.tmp"/var/cache/apt/archives/*.deb "$dir.tmp"/var/lib/apt/lists/*
touch "$dir.tmp/.rampart-base-complete"
mv "$dir.tmp" "$dir"
echo "$dir"
