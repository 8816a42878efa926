#!/usr/bin/env bash
# Runs one row of the host matrix in a fresh virtual machine, as root:
#   vm/run.sh a|b|c|d
# (see vm/README.md for what each row proves). Boots the cached Debian 12
# image (vm/image.sh) through a copy-on-write overlay under qemu's TCG, with
# a second disk carrying this checkout's bin/, the install scripts, the
# systemd unit, the profiles, the compiled host-conformance suite and the
# row's script (vm/guest/). The guest installs sandboxd, runs the suite,
# writes its results to that disk and powers off; this script reads them
# back and fails when the suite failed, the VM wrote no verdict, or the row
# ran out of time (SANDBOXD_VM_TIMEOUT seconds, default 1500: qemu is killed).
#
# Output: bin/vm/<row>/ (result, go-test.log, row.log, console.log).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'vm-test: %s\n' "$*" >&2; exit 1; }
row=${1:-}
case $row in
  a|b|c) flavour=base ;;
  d) die "row d (the Compose recipe under Docker in the VM) is not built yet; vm/README.md (\"Row d\") says what it needs and why" ;;
  *) die "usage: vm/run.sh a|b|c|d" ;;
esac
[ "$(id -u)" = 0 ] || die "run as root (the image and its payload keep root-owned files)"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is missing; run make deps-vm"
for b in sandboxd sandboxctl sandboxd-nsinit sandboxd-exec sandboxd-relay; do
  [ -x "bin/$b" ] || die "bin/$b is missing: run make build first"
done
timeout_s=${SANDBOXD_VM_TIMEOUT:-1500}
go=${GO:-go}

t0=$(date +%s)
img=$(vm/image.sh "$flavour")
t_image=$(( $(date +%s) - t0 ))

out=bin/vm/$row
rm -rf "$out"; mkdir -p "$out"
work=$(mktemp -d /var/tmp/sandboxd-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The payload disk: everything row-specific, read by the image's one-shot.
p=$work/payload
mkdir -p "$p/src/bin" "$p/results"
cp bin/sandboxd bin/sandboxctl bin/sandboxd-nsinit bin/sandboxd-exec bin/sandboxd-relay "$p/src/bin/"
cp -r scripts profiles deploy "$p/src/"
cp vm/guest/row.sh "$p/row.sh"
echo "$row" > "$p/row"
# SANDBOXD_VM_TESTS narrows the suite (a go test -run pattern) while working
# on one test; the targets always run all of it.
echo "${SANDBOXD_VM_TESTS:-^TestHost}" > "$p/tests"
# The suite, compiled here (the guest has no Go; it links libseccomp
# dynamically, which the image has).
"$go" test -c -tags hostconf -o "$p/it.test" ./integration
chown -R root:root "$p"
mke2fs -q -t ext4 -L payload -d "$p" "$work/payload.img" 512M >/dev/null

qemu-img create -q -f qcow2 -b "$img/base.img" -F raw "$work/root.qcow2"
# no_timer_check: under TCG on a busy host the kernel's IO-APIC timer check
# can fail and panic the boot (seen here); panic=-1 with -no-reboot makes
# any panic end qemu at once instead of at the timeout.
echo "vm-test: row $row: booting $(basename "$img") (image ready in ${t_image} s; timeout ${timeout_s} s)"
t1=$(date +%s)
set +e
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 \
  -accel tcg,thread=multi -cpu max -smp 2 -m 4096 \
  -kernel "$img/vmlinuz" -initrd "$img/initrd.img" \
  -append 'root=/dev/vda rw console=ttyS0 quiet systemd.show_status=error no_timer_check panic=-1' \
  -drive "file=$work/root.qcow2,if=virtio,format=qcow2" \
  -drive "file=$work/payload.img,if=virtio,format=raw" \
  -nic none -display none -monitor none -serial "file:$out/console.log" -no-reboot
qrc=$?
set -e
t_vm=$(( $(date +%s) - t1 ))
debugfs -R "rdump /results $work" "$work/payload.img" >/dev/null 2>&1 || true
cp -r "$work/results/." "$out/" 2>/dev/null || true
verdict=$(cat "$out/result" 2>/dev/null || true)
echo "vm-test: row $row: qemu exit $qrc after ${t_vm} s; image ${t_image} s; total $(( $(date +%s) - t0 )) s"
[ -f "$out/go-test.log" ] && grep -E '^(=== RUN|--- |    --- |PASS|FAIL|ok|panic)' "$out/go-test.log" | grep -v '^=== RUN' || true
echo "vm-test: row $row: ${verdict:-no verdict}"
[ "$qrc" = 124 ] || [ "$qrc" = 137 ] && die "row $row: timed out after ${timeout_s} s (qemu killed); console: $out/console.log"
case $verdict in "PASS "*) exit 0 ;; esac
die "row $row failed; see $out/ (go-test.log, row.log, console.log)"
