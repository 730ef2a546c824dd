#!/usr/bin/env bash
# make image: a bootable Debian 12 disk image of a rampart node.
#
#   images/rootfs/build.sh                      # OUT=bin/image, DEB=newest dist/rampart_*.deb
#   DEB=dist/rampart_1.2.3_amd64.deb NODE_YAML=my-node.yaml OUT=/tmp/img images/rootfs/build.sh
#
# Steps: the cached debootstrap base (base.sh: bookworm, linux-image-amd64, systemd), a copy of it,
# the .deb installed with dpkg inside it (its postinst makes the users and enables the units),
# the node's settings (hostname, fstab, DHCP on eth*, serial console, an empty machine-id so each
# node makes its own), /etc/rampart/node.yaml.example and, with NODE_YAML, /etc/rampart/node.yaml;
# with EXTRA_DIR, its tree copied over the root and the units named in EXTRA_UNITS enabled
# (make image-test's check). Then a raw disk:
# an MBR partition table, one ext4 partition made from the tree (mkfs.ext4 -d), extlinux on it.
# Writes $OUT/rampart.img, $OUT/vmlinuz, $OUT/initrd.img and $OUT/build.txt (sizes, times).
# Needs root, debootstrap, sfdisk, mkfs.ext4, extlinux, losetup/mount (hack/deps.sh images).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=images/rootfs
out=${OUT:-bin/image}
deb=${DEB:-$(ls -t dist/rampart_*.deb 2>/dev/null | head -1 || true)}
node_yaml=${NODE_YAML:-}
extra_dir=${EXTRA_DIR:-}
extra_units=${EXTRA_UNITS:-}
label=rampart-root
t0=$(date +%s)

die() { echo "build.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, loop mount)"
[ -n "$deb" ] && [ -f "$deb" ] || die "no .deb: run make deb, or set DEB=path (got '${deb}')"
for t in sfdisk mkfs.ext4 extlinux losetup mount chroot; do
  command -v "$t" >/dev/null || die "$t missing (hack/deps.sh images)"
done
mbr=/usr/lib/syslinux/mbr/mbr.bin
[ -f "$mbr" ] || die "$mbr missing (syslinux-common; hack/deps.sh images)"
[ -z "$node_yaml" ] || [ -f "$node_yaml" ] || die "NODE_YAML $node_yaml: no such file"

base=$("$here/base.sh")
t_base=$(date +%s)
mkdir -p "$out"
root=$out/rootfs
mnt=$out/mnt
cleanup() {
  mountpoint -q "$root/proc" 2>/dev/null && umount "$root/proc"
  mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
  [ -n "${loop:-}" ] && losetup -d "$loop" 2>/dev/null
  true
}
trap cleanup EXIT
rm -rf "$root"
cp -a "$base" "$root"
rm -f "$root/.rampart-base-complete"

# The package, as an operator would install it.
mount -t proc proc "$root/proc"
cp "$deb" "$root/tmp/rampart.deb"
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  dpkg -i /tmp/rampart.deb || die "dpkg -i $deb in the image failed"
rm -f "$root/tmp/rampart.deb"
umount "$root/proc"

# The node around it.
echo rampart >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\trampart\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
printf 'LABEL=%s\t/\text4\terrors=remount-ro\t0\t1\n' "$label" >"$root/etc/fstab"
mkdir -p "$root/etc/systemd/network"
cat >"$root/etc/systemd/network/80-rampart-dhcp.network" <<'NET'
# make image: every wired interface takes DHCP. Replace with the site's addressing.
[Match]
Name=eth* en*

[Network]
DHCP=yes
NET
chroot "$root" systemctl enable systemd-networkd.service >/dev/null 2>&1
# An empty machine-id: each node makes its own on first boot.
: >"$root/etc/machine-id"
rm -f "$root/var/lib/dbus/machine-id"
install -m 0644 "$here/node.yaml.example" "$root/etc/rampart/node.yaml.example"
if [ -n "$node_yaml" ]; then
  # Checked by the image's own rampart, as rampart-firstboot.service will on boot.
  cp "$node_yaml" "$root/tmp/node.yaml"
  chroot "$root" /usr/bin/rampart firstboot -check -config /tmp/node.yaml -out /etc/rampart >/dev/null ||
    die "NODE_YAML $node_yaml is not valid (rampart firstboot -check above)"
  rm -f "$root/tmp/node.yaml"
  install -m 0640 -g "$(chroot "$root" getent group rampart | cut -d: -f3)" "$node_yaml" "$root/etc/rampart/node.yaml"
fi
if [ -n "$extra_dir" ]; then
  cp -a --no-preserve=ownership "$extra_dir"/. "$root"/
fi
for u in $extra_units; do
  chroot "$root" systemctl enable "$u" >/dev/null 2>&1 || die "enable $u (from EXTRA_DIR)"
done
for u in rampart-firstboot.service rampart-agent.service rampart-proxy.service; do
  [ "$(chroot "$root" systemctl is-enabled "$u" 2>/dev/null)" = enabled ] || die "$u is not enabled in the image (the .deb's postinst enables it)"
done

kver=$(basename "$(ls "$root"/boot/vmlinuz-* | sort -V | tail -1)")
kver=${kver#vmlinuz-}
cp "$root/boot/vmlinuz-$kver" "$out/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$out/initrd.img"
mkdir -p "$root/boot/extlinux"
cat >"$root/boot/extlinux/extlinux.conf" <<CONF
DEFAULT rampart
TIMEOUT 10
PROMPT 0
SERIAL 0 115200
LABEL rampart
  LINUX /boot/vmlinuz-$kver
  INITRD /boot/initrd.img-$kver
  APPEND root=LABEL=$label ro console=tty0 console=ttyS0,115200n8 net.ifnames=0
CONF
cp /usr/lib/syslinux/modules/bios/{ldlinux.c32,libcom32.c32,libutil.c32} "$root/boot/extlinux/" 2>/dev/null || true
t_tree=$(date +%s)

# The disk: 1 MiB for the MBR and extlinux's gap, the tree plus a quarter, at least 256 MiB free.
used_mib=$(du -s --block-size=1M "$root" | cut -f1)
part_mib=$(( used_mib + used_mib / 4 + 256 ))
img=$out/rampart.img
rm -f "$img"
truncate -s $(( (part_mib + 1) * 1024 * 1024 )) "$img"
echo "start=2048, type=83, bootable" | sfdisk -q "$img"
# 64bit off: extlinux reads ext4 without it most safely.
mkfs.ext4 -q -F -L "$label" -O ^64bit -E offset=$((2048 * 512)) -d "$root" "$img" "${part_mib}M" ||
  die "mkfs.ext4 -d $root failed"
mkdir -p "$mnt"
loop=$(losetup -f --show -o $((2048 * 512)) --sizelimit $((part_mib * 1024 * 1024)) "$img")
mount "$loop" "$mnt"
extlinux --install "$mnt/boot/extlinux" >/dev/null 2>&1 || die "extlinux --install failed"
umount "$mnt"
losetup -d "$loop"
loop=
dd if="$mbr" of="$img" bs=440 count=1 conv=notrunc status=none
t_end=$(date +%s)

{
  echo "image:        $img"
  echo "disk bytes:   $(stat -c %s "$img") (apparent; $(du -k "$img" | cut -f1) KiB allocated)"
  echo "tree MiB:     $used_mib (partition $part_mib MiB)"
  echo "kernel:       $kver"
  echo "package:      $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) ($(stat -c %s "$deb") bytes)"
  echo "node.yaml:    ${node_yaml:-none (node.yaml.example only)}"
  echo "seconds:      base $((t_base - t0)), tree $((t_tree - t_base)), disk $((t_end - t_tree)), total $((t_end - t0))"
} | tee "$out/build.txt"
