#!/usr/bin/env bash
# `make run`: on a fresh Debian 12 machine, as root, install what is missing,
# build, install, and start the supervisor in the foreground as its service
# user with no capability. Honours every SANDBOXD_* setting.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "make run: run as root (it installs packages and the helper's file capabilities)" >&2; exit 1; }
scripts/deps.sh
make --no-print-directory build
scripts/install.sh

user=${SANDBOXD_USER:-sandboxd}
export SANDBOXD_SOCKET=${SANDBOXD_SOCKET:-/run/sandboxd/sandboxd.sock}
export SANDBOXD_STATE_DIR=${SANDBOXD_STATE_DIR:-/var/lib/sandboxd}
prefix=${PREFIX:-/usr/local}

# Per-exec memory, pids and CPU limits: delegate a cgroup directory below
# this shell's cgroup (which the supervisor inherits) to the service user.
"$prefix/bin/sandboxctl" admin delegate-cgroups --user "$user" --parent "${SANDBOXD_CGROUP_PARENT:-sandboxd}"

cat <<MSG

sandboxd: starting as user '$user' (no capabilities)
  socket:    $SANDBOXD_SOCKET
  state dir: $SANDBOXD_STATE_DIR
  try, in another shell:
    $prefix/bin/sandboxctl run --lang python -c 'print(1)'
    $prefix/bin/sandboxctl run --lang javascript -c 'console.log(6*7)'
  (add --socket $SANDBOXD_SOCKET when you changed it; Ctrl-C stops the supervisor)

MSG
# setpriv: become the service user, clear supplementary groups to its own,
# and start with empty inheritable and ambient capability sets. The
# supervisor refuses to start if any capability is left (I1).
exec setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups \
  --inh-caps=-all --ambient-caps=-all \
  "$prefix/bin/sandboxd"
