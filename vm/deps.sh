#!/usr/bin/env bash
# Installs what the host matrix (make vm-image, vm-test, vm-test-all) needs
# on the host, on Debian 12, as root: qemu (TCG; no KVM needed), qemu-img
# for the per-run overlays, debootstrap for the image, e2fsprogs for
# mke2fs -d and debugfs. Installs only what is missing.
set -euo pipefail
need=()
for pkg in qemu-system-x86 qemu-utils debootstrap e2fsprogs; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "deps-vm: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
