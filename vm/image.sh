#!/usr/bin/env bash
# Builds (once) the Debian 12 base image the host matrix boots, as root:
# debootstrap --variant=minbase from Debian's packages, the cloud kernel, and
# the guest side of the matrix (vm/guest/) installed as a one-shot unit that
# runs the row's script from the payload disk on boot.
#
# The image is cached under SANDBOXD_VM_CACHE (default /var/cache/sandboxd-vm),
# keyed by the Debian release, the mirror, the package list and the recipe
# number below; a cache hit costs nothing. Prints the cache directory, which holds
# base.img (raw ext4), vmlinuz and initrd.img.
#
# Usage: vm/image.sh [base]
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'vm-image: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (debootstrap and the image's file ownership need it)"
for t in debootstrap mke2fs qemu-img; do
  command -v "$t" >/dev/null || die "$t is missing; run make deps-vm (or: apt-get install qemu-system-x86 qemu-utils debootstrap e2fsprogs)"
done

flavour=${1:-base}
release=${SANDBOXD_VM_RELEASE:-bookworm}
mirror=${SANDBOXD_VM_MIRROR:-http://deb.debian.org/debian}
size=${SANDBOXD_VM_IMAGE_SIZE:-3G}
# What the guest needs to install and run sandboxd (the runtime packages of
# scripts/deps.sh, without the build and data-science ones) and to be booted
# by qemu with -kernel/-initrd.
pkgs="systemd systemd-sysv udev dbus kmod linux-image-cloud-amd64 initramfs-tools
bubblewrap python3 nodejs libcap2-bin libseccomp2 util-linux iproute2 procps
apparmor e2fsprogs passwd"
# One flavour today; a row needing other packages (Docker for the Compose
# row) gets a flavour of its own, cached under its own key.
case $flavour in
  base) ;;
  *) die "unknown flavour '$flavour' (base)" ;;
esac
pkgs=$(echo $pkgs)

cache=${SANDBOXD_VM_CACHE:-/var/cache/sandboxd-vm}
# RECIPE: bump when what this script does to the image changes (edits of
# its messages or comments must not cost a rebuild).
recipe=1
key=$( { echo "$recipe $release $mirror $size $flavour"; echo "$pkgs"; } | sha256sum | cut -c1-16)
out=$cache/$flavour-$release-$key
if [ -f "$out/base.img" ] && [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.img" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$cache"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
start=$(date +%s)
echo "vm-image: debootstrap $release ($flavour) into $root" >&2
debootstrap --variant=minbase --include="${pkgs// /,}" "$release" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 ||
  { tail -30 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }

# Boot and console: root on the first virtio disk, a root login on the
# serial console for debugging, no network (qemu runs with -nic none).
echo sandboxd-vm > "$root/etc/hostname"
printf '/dev/vda / ext4 rw,relatime 0 1\n' > "$root/etc/fstab"
chroot "$root" passwd -d root >/dev/null
# The one hook the matrix needs in the image: on boot, mount the payload
# disk (the second virtio disk, made per run by vm/run.sh) and run its
# row.sh, which writes its results to that disk and powers off. Everything
# row-specific lives on the payload disk, so the image never changes with it.
install -d "$root/payload"
cat > "$root/etc/systemd/system/sandboxd-vm-row.service" <<'UNIT'
[Unit]
Description=sandboxd host matrix: run the row on the payload disk
After=multi-user.target
ConditionPathExists=/dev/vdb

[Service]
Type=simple
ExecStartPre=/bin/mount /dev/vdb /payload
ExecStart=/bin/bash /payload/row.sh
StandardOutput=journal+console
StandardError=journal+console
# row.sh powers off itself; if it dies first, power off all the same.
ExecStopPost=/bin/systemctl --no-block poweroff

[Install]
WantedBy=multi-user.target
UNIT
chroot "$root" systemctl enable sandboxd-vm-row.service >/dev/null 2>&1
# Nothing else the boot does not need: no timers, no docker until its row.
for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer docker.service docker.socket containerd.service; do
  chroot "$root" systemctl disable "$u" >/dev/null 2>&1 || true
done
chroot "$root" apt-get clean
cp "$root"/boot/vmlinuz-* "$work/vmlinuz"
cp "$root"/boot/initrd.img-* "$work/initrd.img"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
mke2fs -q -t ext4 -L sandboxd-vm -d "$root" "$work/base.img" "$size" >/dev/null
rm -rf "$root"
mv "$work" "$out.tmp" && mv "$out.tmp" "$out"
trap - EXIT
echo "vm-image: built $out in $(( $(date +%s) - start )) s" >&2
echo "$out"
