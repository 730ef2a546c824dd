#!/usr/bin/env bash
# make image-test: boot a test image (build.sh with images/rootfs/test/) under qemu, wait for the
# guest's rampart-image-check to print its verdict on the serial console and power off.
#
#   images/rootfs/boot-test.sh [IMAGE]        # default bin/image-test/rampart.img
#
# ACCEL=tcg (default: software emulation, as in CI) or kvm; TIMEOUT seconds (default 900).
# The disk is opened with snapshot=on: the image is not changed. The serial log is kept next to
# the image (serial.log). Exit 0 only on "RAMPART-IMAGE-TEST: PASS".
set -euo pipefail
img=${1:-bin/image-test/rampart.img}
accel=${ACCEL:-tcg}
timeout=${TIMEOUT:-900}
log=$(dirname "$img")/serial.log
command -v qemu-system-x86_64 >/dev/null || { echo "boot-test.sh: qemu-system-x86_64 missing (hack/deps.sh images)" >&2; exit 1; }
[ -f "$img" ] || { echo "boot-test.sh: no image at $img (make image-test builds it)" >&2; exit 1; }

cpu=max
[ "$accel" = kvm ] && cpu=host
start=$(date +%s.%N)
rc=0
timeout --foreground "$timeout" qemu-system-x86_64 -machine pc -accel "$accel" -cpu "$cpu" -smp 2 -m 2048 \
  -display none -monitor none -serial "file:$log" -no-reboot \
  -drive "file=$img,format=raw,if=virtio,snapshot=on" \
  -netdev user,id=n0 -device virtio-net-pci,netdev=n0 || rc=$?
end=$(date +%s.%N)
verdict=$(grep -a 'RAMPART-IMAGE-TEST:' "$log" | tail -1 || true)
sed -n '/^--- rampart-firstboot/,/RAMPART-IMAGE-TEST:/p' "$log" | tr -d '\r'
printf 'boot-test.sh: accel %s, qemu ran %.1f s (exit %s); serial log %s\n' "$accel" "$(awk -v a="$start" -v b="$end" 'BEGIN{print b-a}')" "$rc" "$log"
case "$verdict" in
  *"RAMPART-IMAGE-TEST: PASS"*) echo "boot-test.sh: $verdict"; exit 0 ;;
  "") echo "boot-test.sh: no verdict on the serial console (timeout ${timeout}s or a boot failure); last lines:" >&2
      tail -30 "$log" | tr -d '\r' >&2; exit 1 ;;
  *) echo "boot-test.sh: $verdict" >&2; exit 1 ;;
esac
