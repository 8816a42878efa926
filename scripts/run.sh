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
helper_group=${SANDBOXD_HELPER_GROUP:-sandboxd-helper}
export SANDBOXD_SOCKET=${SANDBOXD_SOCKET:-/run/sandboxd/sandboxd.sock}
export SANDBOXD_STATE_DIR=${SANDBOXD_STATE_DIR:-/var/lib/sandboxd}
# The socket goes to the callers' group, never the helper's (install.sh
# refuses one group for both): membership of it is API access.
export SANDBOXD_SOCKET_GROUP=${SANDBOXD_SOCKET_GROUP:-sandboxd-clients}
# The state directory is root-owned (the helper refuses a workspace root
# whose parent the service uid owns); the audit log has its own directory.
export SANDBOXD_AUDIT_LOG=${SANDBOXD_AUDIT_LOG:-$SANDBOXD_STATE_DIR/audit/audit.log}
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
  another user may call the API once in group $SANDBOXD_SOCKET_GROUP (to open
  the socket) and allowed by uid (SANDBOXD_ALLOW_UID=<uid> make run); prefer
  that to SANDBOXD_ALLOW_GID, which would make every member a caller.

MSG
# setpriv: become the service user with exactly the two supplementary
# groups it needs - the helper group (to exec the helper) and the socket
# group (to give the socket to it) - and none of its other memberships
# (payloads inherit the supervisor's groups; SECURITY.md, L5), and start
# with empty inheritable and ambient capability sets. The supervisor
# refuses to start if any capability is left (I1).
groups=$(getent group "$helper_group" | cut -d: -f3),$(getent group "$SANDBOXD_SOCKET_GROUP" | cut -d: -f3)
exec setpriv --reuid="$user" --regid="$(id -g "$user")" --groups="$groups" \
  --inh-caps=-all --ambient-caps=-all \
  "$prefix/bin/sandboxd"
