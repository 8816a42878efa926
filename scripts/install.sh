#!/usr/bin/env bash
# Installs sandboxd from bin/ onto this host, as root:
#   - the service user (SANDBOXD_USER, default sandboxd);
#   - the helper with its file capabilities, executable by that user's group
#     only, no setuid bit anywhere;
#   - the helper's root-owned config and the seccomp profiles;
#   - the state directory (workspaces) and the socket directory for that user.
# Every SANDBOXD_* setting is honoured; the helper config's workspace root
# follows SANDBOXD_STATE_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "install: run as root (it sets file capabilities and creates the service user)" >&2; exit 1; }

user=${SANDBOXD_USER:-sandboxd}
prefix=${PREFIX:-/usr/local}
libexec=$prefix/libexec/sandboxd
etc=/etc/sandboxd   # baked into the helper at build time (Makefile NSINIT_CONFIG)
state=${SANDBOXD_STATE_DIR:-/var/lib/sandboxd}
socket=${SANDBOXD_SOCKET:-/run/sandboxd/sandboxd.sock}

if ! id -u "$user" >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir "$state" --shell /usr/sbin/nologin "$user"
  echo "install: created system user $user"
fi
group=$(id -gn "$user")

install -d -m 0755 -o root -g root "$prefix/bin" "$libexec" "$etc" "$etc/profiles"
install -m 0755 -o root -g root bin/sandboxd bin/sandboxctl "$prefix/bin/"
install -m 0755 -o root -g root bin/sandboxd-exec "$libexec/sandboxd-exec"
# The helper: only the service user's group may run it, and its only
# privilege is these two file capabilities (see SECURITY.md).
install -m 0750 -o root -g "$group" bin/sandboxd-nsinit "$libexec/sandboxd-nsinit"
setcap cap_sys_admin,cap_net_admin+ep "$libexec/sandboxd-nsinit"

install -m 0644 -o root -g root profiles/payload.json profiles/kubernetes-worker.json "$etc/profiles/"
"$libexec/sandboxd-nsinit" --compile-profile "$etc/profiles/payload.json"
"$prefix/bin/sandboxctl" admin helper-config \
  --workspace-root "$state/workspaces" --shim "$libexec/sandboxd-exec" \
  --profile "$etc/profiles/payload.json" > "$etc/nsinit.json.new"
chmod 0644 "$etc/nsinit.json.new"
mv "$etc/nsinit.json.new" "$etc/nsinit.json"

install -d -m 0700 -o "$user" -g "$group" "$state" "$state/workspaces"
install -d -m 0755 -o "$user" -g "$group" "$(dirname "$socket")"

echo "install: helper $libexec/sandboxd-nsinit: $(getcap "$libexec/sandboxd-nsinit" | cut -d' ' -f2-)"
