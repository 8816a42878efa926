package doctor

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/internal/procstatus"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

// The groups around the helper. Membership of the
// helper's group is the right to run the privileged helper directly,
// outside the supervisor's audit trail, cgroups and quota; membership of the
// socket's group is API access (a member can newgrp into it, so the
// supervisor's primary-gid rule cannot tell the two apart). So the helper
// group holds the service user alone, the socket group is another group,
// and the supervisor carries no other supplementary group: payloads keep
// the supervisor's groups (setgroups is denied in the sandbox's user
// namespace, so bubblewrap cannot drop them), and any host file readable by
// one of them would be readable by every payload.

// groupDB is what /etc/passwd and /etc/group say about membership.
type groupDB struct {
	users   map[uint32]string   // uid -> name
	primary map[uint32][]string // gid -> users whose primary group it is
	listed  map[uint32][]string // gid -> supplementary members
}

func readGroupDB(h Host) (*groupDB, error) {
	db := &groupDB{users: map[uint32]string{}, primary: map[uint32][]string{}, listed: map[uint32][]string{}}
	passwd, err := h.ReadFile("/etc/passwd")
	if err != nil {
		return nil, err
	}
	group, err := h.ReadFile("/etc/group")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(passwd), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 {
			continue
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		db.users[uint32(uid)] = f[0]
		db.primary[uint32(gid)] = append(db.primary[uint32(gid)], f[0])
	}
	for _, line := range strings.Split(string(group), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 || f[3] == "" {
			continue
		}
		if gid, err := strconv.ParseUint(f[2], 10, 32); err == nil {
			db.listed[uint32(gid)] = append(db.listed[uint32(gid)], strings.Split(f[3], ",")...)
		}
	}
	return db, nil
}

// members are the users whose primary or supplementary group is gid.
func (db *groupDB) members(gid uint32) []string {
	m := append(slices.Clone(db.primary[gid]), db.listed[gid]...)
	slices.Sort(m)
	return slices.Compact(m)
}

// supervisorIDs reads the supervisor's uid, primary gid and supplementary
// groups from its /proc status.
func supervisorIDs(h Host, sup *Supervisor) (uid, gid uint32, groups []uint32, err error) {
	status, err := h.ReadFile(fmt.Sprintf("/proc/%d/status", sup.PID))
	if err != nil {
		return 0, 0, nil, err
	}
	first := func(key string) (uint32, error) {
		v, _ := procstatus.Field(status, key)
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0, fmt.Errorf("no %s: line", key)
		}
		n, err := strconv.ParseUint(f[0], 10, 32)
		return uint32(n), err
	}
	if uid, err = first("Uid"); err != nil {
		return 0, 0, nil, err
	}
	if gid, err = first("Gid"); err != nil {
		return 0, 0, nil, err
	}
	v, _ := procstatus.Field(status, "Groups")
	for _, g := range strings.Fields(v) {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("Groups: %q", v) //nolint:staticcheck // ST1005: "Groups:" is the field name in /proc/PID/status
		}
		groups = append(groups, uint32(n))
	}
	return uid, gid, groups, nil
}

const helperGroupFix = "as root: groupadd --system sandboxd-helper && usermod -aG sandboxd-helper SERVICE_USER && chown root:sandboxd-helper HELPER && chmod 0750 HELPER && setcap " + HelperSetcap + " HELPER\n(or `make install`, which does this); remove everyone else: gpasswd -d NAME GROUP; API callers belong in the socket group (sandboxd-clients)"

// checkHelperGroup: the helper's group holds the service user and nobody else.
func checkHelperGroup(h Host, o Options, sup *Supervisor) Result {
	r := Result{Name: "helper.group"}
	st, err := h.Stat(o.HelperPath)
	if err != nil {
		r.Status, r.Detail = Skip, "not checked: the helper is missing"
		return r
	}
	db, err := readGroupDB(h)
	if err != nil {
		r.Status, r.Detail = Skip, fmt.Sprintf("cannot read the user and group databases: %v", err)
		return r
	}
	fix := strings.NewReplacer("HELPER", o.HelperPath, "GROUP", h.GroupName(st.GID)).Replace(helperGroupFix)
	name := h.GroupName(st.GID)
	members := db.members(st.GID)
	service := ""
	if sup != nil {
		if uid, _, _, err := supervisorIDs(h, sup); err == nil {
			service = db.users[uid]
			if service == "" {
				service = fmt.Sprint(uid)
			}
		}
	}
	if service != "" {
		fix = strings.ReplaceAll(fix, "SERVICE_USER", service)
	}
	desc := fmt.Sprintf("the helper's group %s (gid %d) holds [%s]", name, st.GID, strings.Join(members, " "))
	switch {
	case st.GID == 0:
		r.Status, r.Detail = Fail, desc+": group root is no dedicated helper group"
	case len(members) > 1:
		r.Status, r.Detail = Fail, desc+": each of them may run the helper directly, outside the supervisor's audit trail, cgroups and quota; only the service user may be in it"
	case service != "" && len(members) == 1 && members[0] != service:
		r.Status, r.Detail = Fail, desc+fmt.Sprintf(", not the supervisor's user %s", service)
	case len(members) == 0:
		// In a container the runtime may add the group without /etc/group
		// saying so; the supervisor check below sees its real groups.
		r.Status, r.Detail = Warn, desc+": nobody, by /etc/passwd and /etc/group; the supervisor must get it from its container runtime"
	default:
		r.Status, r.Detail = OK, desc+" only"
		return r
	}
	r.Fix = fix
	return r
}

// checkSocketGroup: the socket's group is not the helper's.
func checkSocketGroup(h Host, o Options) Result {
	r := Result{Name: "socket.group"}
	sock, err := h.Stat(o.SocketPath)
	if err != nil {
		r.Status, r.Detail = Skip, fmt.Sprintf("no socket at %s to check (%v)", o.SocketPath, err)
		return r
	}
	helper, err := h.Stat(o.HelperPath)
	if err != nil {
		r.Status, r.Detail = Skip, "not checked: the helper is missing"
		return r
	}
	desc := fmt.Sprintf("%s: group %s, mode %04o", o.SocketPath, h.GroupName(sock.GID), uint32(sock.Mode.Perm()))
	if sock.GID == helper.GID {
		r.Status = Fail
		r.Detail = desc + ": the socket's group is the helper's, so everyone who may call the API may also run the helper directly"
		r.Fix = "as root: groupadd --system sandboxd-clients && usermod -aG sandboxd-clients SERVICE_USER; start sandboxd with --socket-group sandboxd-clients (SANDBOXD_SOCKET_GROUP; make run does); put API callers in sandboxd-clients, never in " + h.GroupName(helper.GID)
		return r
	}
	r.Status = OK
	r.Detail = desc + fmt.Sprintf(" (not the helper's group %s); membership of it is API access: prefer allowing callers by uid (--allow-uid)", h.GroupName(helper.GID))
	if sock.Mode.Perm()&0o006 != 0 {
		r.Status = Fail
		r.Detail = desc + ": any local user may connect"
		r.Fix = "restart sandboxd (it makes the socket 0660)"
	}
	return r
}

// checkSupervisorGroups: the supervisor carries the helper's group (to run
// it), the socket's group (to give the socket to it) and nothing else.
func checkSupervisorGroups(h Host, o Options, sup *Supervisor) Result {
	r := Result{Name: "supervisor.groups"}
	if sup == nil {
		r.Status, r.Detail = Skip, "no running supervisor to check"
		return r
	}
	uid, gid, groups, err := supervisorIDs(h, sup)
	if err != nil {
		r.Status, r.Detail = Skip, fmt.Sprintf("cannot read the supervisor's groups (%v): run doctor where it runs", err)
		return r
	}
	service := fmt.Sprint(uid)
	if db, err := readGroupDB(h); err == nil && db.users[uid] != "" {
		service = db.users[uid]
	}
	need := map[uint32]string{}
	if st, err := h.Stat(o.HelperPath); err == nil {
		need[st.GID] = "the helper's group"
	}
	if st, err := h.Stat(o.SocketPath); err == nil {
		need[st.GID] = "the socket's group"
	}
	var names, extra []string
	for _, g := range groups {
		names = append(names, h.GroupName(g))
		if _, ok := need[g]; !ok && g != gid {
			extra = append(extra, h.GroupName(g))
		}
	}
	desc := fmt.Sprintf("pid %d: group %s, supplementary [%s]", sup.PID, h.GroupName(gid), strings.Join(names, " "))
	for g, what := range need {
		if g != gid && !slices.Contains(groups, g) {
			r.Status = Fail
			r.Detail = fmt.Sprintf("%s: it is not in %s %s", desc, what, h.GroupName(g))
			r.Fix = "as root: usermod -aG " + h.GroupName(g) + " " + service + ", then restart it with that group (make run and the recipes in deploy/ do)"
			return r
		}
	}
	if len(extra) > 0 {
		r.Status = Warn
		r.Detail = fmt.Sprintf("%s: it does not need %s; payloads inherit the supervisor's groups (bwrap cannot drop them once setgroups is denied), so every host file readable by them is readable by payloads", desc, strings.Join(extra, ", "))
		r.Fix = "start it with only the helper and socket groups: setpriv --groups=HELPER_GID,SOCKET_GID (make run does); systemd: SupplementaryGroups=sandboxd-helper sandboxd-clients and no other; Kubernetes: no pod-level fsGroup, supplementalGroupsPolicy: Strict"
		return r
	}
	r.Status, r.Detail = OK, desc+" (only what it needs)"
	return r
}

// checkStateDir: the workspace root's parent is root-owned and writable by
// nobody else, and the root itself a real directory of the supervisor's.
// The helper refuses anything else (it opens the root with O_NOFOLLOW below
// that parent): were the parent the service uid's, it could swap the root
// for a symlink between the supervisor's check and the helper's use.
// An install from before the root-owned layout fails here with the fix.
func checkStateDir(h Host, hc *config.Config, sup *Supervisor) Result {
	r := Result{Name: "state.dir"}
	if hc == nil {
		r.Status, r.Detail = Skip, "not checked: no valid helper config names the workspace root"
		return r
	}
	root := hc.WorkspaceRoot
	parent := filepath.Dir(root)
	uid, service := -1, "sandboxd"
	if sup != nil {
		if u, _, _, err := supervisorIDs(h, sup); err == nil {
			uid, service = int(u), fmt.Sprint(u)
			if db, err := readGroupDB(h); err == nil && db.users[u] != "" {
				service = db.users[u]
			}
		}
	}
	fix := fmt.Sprintf("as root: chown root:root %s && chmod 0755 %s && install -d -o "+service+" -m 0700 %s/workspaces %s/sessions %s/audit\n(`make install` lays it out so; the audit log then goes to %s/audit/audit.log: SANDBOXD_AUDIT_LOG)", parent, parent, parent, parent, parent, parent)
	pst, err := h.Lstat(parent)
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("the workspace root's parent %s: %v", parent, err), fix
		return r
	}
	desc := fmt.Sprintf("%s: uid %d, mode %04o", parent, pst.UID, uint32(pst.Mode.Perm())|specialBits(pst.Mode))
	if !pst.Mode.IsDir() || pst.UID != 0 || pst.Mode.Perm()&0o022 != 0 {
		r.Status = Fail
		r.Detail = desc + ": the helper refuses a workspace root whose parent is not a root-owned directory writable by nobody else"
		r.Fix = fix
		return r
	}
	st, err := h.Lstat(root)
	switch {
	case err != nil:
		r.Status, r.Detail = Fail, fmt.Sprintf("%s; the workspace root %s: %v", desc, root, err)
	case !st.Mode.IsDir():
		r.Status, r.Detail = Fail, fmt.Sprintf("%s; the workspace root %s is not a directory (mode %s)", desc, root, st.Mode)
	default:
		if uid >= 0 && int(st.UID) != uid {
			r.Status, r.Detail = Fail, fmt.Sprintf("%s; the workspace root %s is owned by uid %d, not the supervisor's %d", desc, root, st.UID, uid)
			break
		}
		r.Status, r.Detail = OK, fmt.Sprintf("%s (root-owned); workspace root %s owned by uid %d", desc, root, st.UID)
		return r
	}
	r.Fix = fix
	return r
}
