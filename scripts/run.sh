#!/usr/bin/env bash
# `make run`: on a fresh Debian 12 machine, as root, install what is missing
# for running (not for developing: make deps-dev), build, install, delegate
# a cgroup subtree to the service user, and start the supervisor in the
# foreground as that user with no capability. Honours every SANDBOXD_*
# setting. `--start` (used inside the transient systemd scope) only starts.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "make run: run as root (it installs packages and the helper's file capabilities)" >&2; exit 1; }
# Inside the transient scope (below), only the start is left to do.
if [ "${1:-}" != --start ]; then
  scripts/deps.sh
  make --no-print-directory build
  scripts/install.sh
fi

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

# Per-exec memory, pids and CPU limits need a cgroup subtree delegated to
# the service user (docs/DESIGN.md, "Resource limits"); without one the
# supervisor refuses to start unless SANDBOXD_ALLOW_NO_CGROUPS=1.
cgroup_parent=${SANDBOXD_CGROUP_PARENT:-sandboxd}
if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
  if [ "${1:-}" != --start ] && [ -d /run/systemd/system ] && command -v systemd-run >/dev/null; then
    # cgroup v2 under systemd: a root login shell's cgroup (a session
    # scope) is systemd's, not ours to delegate. Run the rest of this
    # script in a transient scope with Delegate=yes: systemd then leaves
    # the scope's subtree to its processes, and the supervisor moves into
    # a leaf of it and enables the controllers for the exec cgroups. The
    # scope ends when the supervisor does.
    echo "cgroups: v2 under systemd: starting in a transient scope with Delegate=yes (systemd-run --scope)"
    exec systemd-run --quiet --scope -p Delegate=yes --unit "sandboxd-run-$$" -- "$PWD/scripts/run.sh" --start
  fi
  own=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup)
  if [ "${1:-}" = --start ]; then
    # The scope's cgroup, as systemd chowns a Delegate=yes unit's to its
    # User=: the directory and the files its owner writes.
    delegated=$own
  else
    # cgroup v2 without systemd: a cgroup of our own below the root, with
    # the supervisor's leaf made ahead; this shell (and so the supervisor
    # it becomes) moves there.
    delegated=/sys/fs/cgroup/sandboxd-run
    echo "+memory +pids +cpu" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
    mkdir -p "$delegated/supervisor"
    chown "$user:" "$delegated/supervisor" "$delegated/supervisor/cgroup.procs" "$delegated/supervisor/cgroup.subtree_control" "$delegated/supervisor/cgroup.threads"
  fi
  chown "$user:" "$delegated" "$delegated/cgroup.procs" "$delegated/cgroup.subtree_control" "$delegated/cgroup.threads"
  [ "$delegated" = "$own" ] || echo $$ > "$delegated/supervisor/cgroup.procs"
  echo "cgroups: v2 subtree $delegated delegated to $user"
else
  # cgroup v1 (or hybrid): a directory below this shell's cgroup (which the
  # supervisor inherits) in each v1 hierarchy, owned by the service user.
  "$prefix/bin/sandboxctl" admin delegate-cgroups --user "$user" --parent "$cgroup_parent"
fi

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
