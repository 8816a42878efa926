#!/usr/bin/env bash
# Installs sandboxd from bin/ onto this host, as root (`make install`):
#   - the service user (SANDBOXD_USER, default sandboxd) with a primary group
#     of its own; a shared primary group is refused;
#   - the namespace-owner user (SANDBOXD_NS_USER, default sandboxd-ns): owns
#     every sandbox's user namespace, so the service uid cannot enter one;
#     its own group, member of nothing, no home, no shell;
#   - the helper group (SANDBOXD_HELPER_GROUP, default sandboxd-helper),
#     holding only the service user: the only group that may run the helper;
#   - the socket group (SANDBOXD_SOCKET_GROUP, default sandboxd-clients) for
#     API callers; never the helper group, never the service user's group;
#   - the helper root:<helper group> 0750 with the permitted-only file
#     capabilities cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin+p (the
#     prelude raises each around the one call that needs it; SECURITY.md),
#     no setuid bit anywhere;
#   - the helper's root-owned config (NSINIT_CONFIG), its namespace-owner
#     file (NSINIT_OWNER) and the seccomp profiles;
#   - the state directory: root-owned (the helper refuses a workspace root
#     whose parent is not), with workspaces/, sessions/, audit/ and
#     archives/ (keyed sessions' archives, on by default) owned by the
#     service user; and the socket's directory.
#
# Directories: the installer creates what is missing and never re-owns or
# re-modes a directory that already exists. An existing directory that is
# not already exactly what sandboxd needs is refused with the fix: `install
# -d -o` on an existing /tmp would drop its sticky bit and give the service
# uid every root-owned entry in it (GNU install applies owner and mode to
# existing directories).
#
# Every path is a setting, so that a test can install into a temporary tree:
# PREFIX, NSINIT_CONFIG and NSINIT_OWNER (the Makefile compiles the same two
# paths into the helper), SANDBOXD_STATE_DIR, SANDBOXD_SOCKET.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { printf 'install: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (it sets file capabilities and creates the service users and groups)"

user=${SANDBOXD_USER:-sandboxd}
ns_user=${SANDBOXD_NS_USER:-sandboxd-ns}
helper_group=${SANDBOXD_HELPER_GROUP:-sandboxd-helper}
socket_group=${SANDBOXD_SOCKET_GROUP:-sandboxd-clients}
prefix=${PREFIX:-/usr/local}
libexec=$prefix/libexec/sandboxd
config=${NSINIT_CONFIG:-/etc/sandboxd/nsinit.json}
owner_file=${NSINIT_OWNER:-/etc/sandboxd/nsinit.owner}
etc=$(dirname "$config")
state=${SANDBOXD_STATE_DIR:-/var/lib/sandboxd}
socket=${SANDBOXD_SOCKET:-/run/sandboxd/sandboxd.sock}
sockdir=$(dirname "$socket")

for v in prefix config owner_file state socket; do
  case ${!v} in /*) ;; *) die "$v must be an absolute path, not '${!v}'" ;; esac
done

# Directories the installer must never adopt as one of sandboxd's own (state
# directory, socket directory): shared system directories. Use a leaf below
# them, e.g. /run/sandboxd or /var/lib/sandboxd.
system_dirs=" / /bin /boot /dev /etc /home /lib /lib64 /media /mnt /opt /proc /root /run /run/user /sbin /srv /sys /tmp /usr /usr/bin /usr/lib /usr/local /usr/local/bin /usr/local/lib /usr/local/libexec /usr/local/sbin /usr/local/share /usr/sbin /usr/share /var /var/cache /var/lib /var/local /var/log /var/opt /var/run /var/spool /var/tmp /dev/shm "
refuse_system_dir() { # what path
  local p
  p=$(realpath -m -- "$2")
  case $system_dirs in *" $p "*)
    die "$1 would be $p, a shared system directory; sandboxd needs a directory of its own below it (for example $p/sandboxd)" ;;
  esac
}
refuse_system_dir "the state directory (SANDBOXD_STATE_DIR)" "$state"
refuse_system_dir "the socket's directory (dirname of SANDBOXD_SOCKET)" "$sockdir"

# mode_str prints a mode the way stat -c %a does (no leading zero).
mode_str() { printf '%o' "$((8#$1))"; }

# ensure_dir creates a directory with exactly this owner and mode, creating
# missing parents root:root 0755. An existing directory is never changed:
# it must already be exactly so, or the install stops with the fix.
ensure_dir() { # path owner group mode setting
  local d=$1 u=$2 g=$3 m=$4 setting=$5 parent have want
  if [ -L "$d" ]; then
    die "$d is a symlink; sandboxd follows none of its own directories. Fix: point $setting at a real directory"
  fi
  if [ ! -e "$d" ]; then
    parent=$(dirname "$d")
    [ -d "$parent" ] || ensure_dir "$parent" root root 0755 "$setting"
    install -d -m "$m" -o "$u" -g "$g" "$d"
    echo "install: created $d ($u:$g $(mode_str "$m"))"
    return
  fi
  [ -d "$d" ] || die "$d exists and is not a directory. Fix: remove it or point $setting elsewhere"
  have=$(stat -c '%U:%G %a' "$d")
  want="$u:$g $(mode_str "$m")"
  if [ "$have" != "$want" ]; then
    die "$d already exists as $have, but sandboxd needs $want, and the installer never re-owns or re-modes a directory it did not create (on /tmp or /run that would hand a system directory to the service user).
Fix: point $setting at a directory that does not exist yet (the installer creates it), e.g. $d/sandboxd;
     or, only if $d belongs to sandboxd alone (an older install): chown $u:$g $d && chmod $(mode_str "$m") $d"
  fi
}

# check_root_chain: the helper trusts its config and owner file only when
# every directory above them is root-owned and writable by nobody else (a
# root-owned sticky directory such as /tmp is fine above them).
check_root_chain() { # dir
  local p=$1 st
  while :; do
    st=$(stat -c '%u %a %F' "$p")
    set -- $st
    [ "$1" = 0 ] || die "$p is owned by uid $1; the helper trusts $config and $owner_file only when every directory above them is root-owned. Fix: chown root $p (or install elsewhere)"
    if [ $((8#$2 & 8#022)) -ne 0 ] && [ $((8#$2 & 8#1000)) -eq 0 ]; then
      die "$p has mode $2, writable by group or others; the helper would refuse the config below it. Fix: chmod go-w $p"
    fi
    [ "$p" = / ] && return
    p=$(dirname "$p")
  done
}

# Pre-flight, before any user, group or file is made: an existing state or
# socket directory must already be sandboxd's.
for d in "$state" "$sockdir"; do
  if [ -e "$d" ] || [ -L "$d" ]; then
    if [ "$d" = "$state" ]; then ensure_dir "$d" root root 0755 SANDBOXD_STATE_DIR
    elif ! id -u "$user" >/dev/null 2>&1 || [ "$(stat -c %U "$d")" != "$user" ] || [ -L "$d" ]; then
      ensure_dir "$d" "$user" "$user" 0755 SANDBOXD_SOCKET   # refuses, with the fix
    fi
  fi
done

# --- users and groups ---------------------------------------------------------

make_system_user() { # name
  if ! id -u "$1" >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$1"
    echo "install: created system user $1 (group $1)"
  fi
}
make_system_group() { # name
  if ! getent group "$1" >/dev/null; then
    groupadd --system "$1"
    echo "install: created system group $1"
  fi
}
# group_users prints every user whose primary or supplementary group is gid.
group_users() { # gid
  { getent passwd | awk -F: -v g="$1" '$4 == g { print $1 }'
    getent group "$1" | cut -d: -f4 | tr ',' '\n'; } | sed '/^$/d' | sort -u
}
# require_private_group: the user's primary group holds that user alone.
require_private_group() { # user role
  local gid gname others
  gid=$(id -g "$1"); gname=$(getent group "$gid" | cut -d: -f1)
  others=$(group_users "$gid" | grep -vx -- "$1" || true)
  if [ -n "$others" ]; then
    die "the $2 '$1' has primary group '$gname', which it shares with: $(echo $others). Every member of the helper's or the user's group could act as it.
Fix: give '$1' a group of its own (groupadd --system $1-own && usermod -g $1-own $1), or choose another user with SANDBOXD_USER / SANDBOXD_NS_USER"
  fi
}

[ "$user" != "$ns_user" ] || die "SANDBOXD_USER and SANDBOXD_NS_USER are both '$user'; the namespace owner must be a uid of its own"
[ "$helper_group" != "$socket_group" ] || die "SANDBOXD_HELPER_GROUP and SANDBOXD_SOCKET_GROUP are both '$helper_group': a member of the socket's group could run the helper directly, outside audit, cgroups and quota"

make_system_user "$user"
make_system_user "$ns_user"
make_system_group "$helper_group"
make_system_group "$socket_group"
require_private_group "$user" "service user"
require_private_group "$ns_user" "namespace owner"

user_gid=$(id -g "$user"); user_group=$(id -gn "$user")
ns_uid=$(id -u "$ns_user"); ns_gid=$(id -g "$ns_user")
helper_gid=$(getent group "$helper_group" | cut -d: -f3)
socket_gid=$(getent group "$socket_group" | cut -d: -f3)
[ "$(id -u "$user")" != "$ns_uid" ] || die "'$user' and '$ns_user' have the same uid $ns_uid"
for g in "$helper_gid" "$socket_gid"; do
  [ "$g" != "$user_gid" ] || die "the service user's primary group (gid $user_gid) is also the helper or socket group; they must be three distinct groups"
done
[ "$helper_gid" != "$socket_gid" ] || die "the helper group and the socket group are the same gid $helper_gid"

# The helper group: the service user and nobody else.
others=$(group_users "$helper_gid" | grep -vx -- "$user" || true)
[ -z "$others" ] || die "group '$helper_group' (may run the helper) also holds: $(echo $others). Only '$user' may be in it.
Fix: gpasswd -d NAME $helper_group for each of them (API callers belong in '$socket_group')"
id -Gn "$user" | tr ' ' '\n' | grep -qx -- "$helper_group" || { usermod -aG "$helper_group" "$user"; echo "install: added $user to $helper_group"; }
# The socket group: the supervisor must be a member to give the socket to it.
id -Gn "$user" | tr ' ' '\n' | grep -qx -- "$socket_group" || { usermod -aG "$socket_group" "$user"; echo "install: added $user to $socket_group"; }
# The namespace owner: member of nothing but its own group.
[ "$(id -G "$ns_user")" = "$ns_gid" ] || die "'$ns_user' is in supplementary groups ($(id -Gn "$ns_user")); the namespace owner must be a member of nothing.
Fix: usermod -G '' $ns_user"

# --- directories -------------------------------------------------------------------
# The state directory is root's: the helper refuses a workspace root whose
# parent the service uid could swap. What the supervisor writes lives in
# subdirectories it owns (the audit log: run with --audit-log $state/audit/audit.log).
ensure_dir "$state" root root 0755 SANDBOXD_STATE_DIR
for d in workspaces sessions audit archives egress; do
  ensure_dir "$state/$d" "$user" "$user_group" 0700 SANDBOXD_STATE_DIR
done
# The socket's directory: the supervisor creates the socket in it (0660,
# group $socket_group); as systemd's RuntimeDirectory= makes it.
ensure_dir "$sockdir" "$user" "$user_group" 0755 SANDBOXD_SOCKET

# --- files -----------------------------------------------------------------------

for d in "$prefix/bin" "$libexec" "$etc" "$etc/profiles" "$(dirname "$owner_file")"; do
  if [ ! -e "$d" ]; then ensure_dir "$d" root root 0755 PREFIX/NSINIT_CONFIG/NSINIT_OWNER; fi
  [ -d "$d" ] && [ ! -L "$d" ] || die "$d is not a directory"
done
check_root_chain "$etc"
check_root_chain "$(dirname "$owner_file")"

install -m 0755 -o root -g root bin/sandboxd bin/sandboxctl "$prefix/bin/"
install -m 0755 -o root -g root bin/sandboxd-exec "$libexec/sandboxd-exec"
install -m 0755 -o root -g root bin/sandboxd-relay "$libexec/sandboxd-relay"
# The helper: only the helper group may run it, and its only privilege is
# these permitted file capabilities (SECURITY.md says which call needs each).
# setcap last: chown drops file capabilities.
install -m 0750 -o root -g "$helper_group" bin/sandboxd-nsinit "$libexec/sandboxd-nsinit"
setcap cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin+p "$libexec/sandboxd-nsinit"

install -m 0644 -o root -g root profiles/payload.json profiles/kubernetes-worker.json "$etc/profiles/"
"$libexec/sandboxd-nsinit" --compile-profile "$etc/profiles/payload.json"
"$prefix/bin/sandboxctl" admin helper-config \
  --workspace-root "$state/workspaces" --shim "$libexec/sandboxd-exec" \
  --profile "$etc/profiles/payload.json" > "$config.new"
chmod 0644 "$config.new"
mv "$config.new" "$config"
# Runtime environments (SANDBOXD_ENVIRONMENTS=minimal opts out of the
# data-science stack); they live in the helper config, so every install
# registers them again.
scripts/environments.sh "$prefix/bin/sandboxctl" "$config" "$prefix"

# The namespace owner, for the helper: exactly "UID:GID\n", root:root 0644.
printf '%s:%s\n' "$ns_uid" "$ns_gid" > "$owner_file.new"
chown root:root "$owner_file.new"
chmod 0644 "$owner_file.new"
mv "$owner_file.new" "$owner_file"

echo "install: helper $libexec/sandboxd-nsinit: root:$helper_group $(stat -c %a "$libexec/sandboxd-nsinit"), $(getcap "$libexec/sandboxd-nsinit" | cut -d' ' -f2-)"
echo "install: namespace owner $ns_user ($ns_uid:$ns_gid) in $owner_file"
echo "install: API callers: add them to group $socket_group (to open the socket) and allow their uid (--allow-uid); never add anyone to $helper_group"
