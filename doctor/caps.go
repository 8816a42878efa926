package doctor

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
)

// Capability numbers the helper needs (linux/capability.h).
const (
	capSetgid   = 6
	capSetuid   = 7
	capNetAdmin = 12
	capSysAdmin = 21
)

// HelperCaps is the exact set the helper's file carries, permitted only:
// no effective bit, so nothing is effective at exec; the prelude raises
// each capability around the one call that needs it (SECURITY.md):
// CAP_SETUID/CAP_SETGID to switch the namespace holder to the
// namespace-owner uid (sandboxd-ns) before unshare(CLONE_NEWUSER),
// CAP_SYS_ADMIN for the namespaces, CAP_NET_ADMIN for the loopback.
const HelperCaps = uint64(1)<<capSetgid | uint64(1)<<capSetuid | uint64(1)<<capSysAdmin | uint64(1)<<capNetAdmin

// HelperSetcap is the setcap argument that gives the helper exactly HelperCaps.
const HelperSetcap = "cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin+p"

// capNames are the kernel's capability names by number, as getcap prints them.
var capNames = []string{
	"cap_chown", "cap_dac_override", "cap_dac_read_search", "cap_fowner", "cap_fsetid",
	"cap_kill", "cap_setgid", "cap_setuid", "cap_setpcap", "cap_linux_immutable",
	"cap_net_bind_service", "cap_net_broadcast", "cap_net_admin", "cap_net_raw",
	"cap_ipc_lock", "cap_ipc_owner", "cap_sys_module", "cap_sys_rawio", "cap_sys_chroot",
	"cap_sys_ptrace", "cap_sys_pacct", "cap_sys_admin", "cap_sys_boot", "cap_sys_nice",
	"cap_sys_resource", "cap_sys_time", "cap_sys_tty_config", "cap_mknod", "cap_lease",
	"cap_audit_write", "cap_audit_control", "cap_setfcap", "cap_mac_override",
	"cap_mac_admin", "cap_syslog", "cap_wake_alarm", "cap_block_suspend", "cap_audit_read",
	"cap_perfmon", "cap_bpf", "cap_checkpoint_restore",
}

// FileCaps is a decoded security.capability attribute (struct vfs_cap_data
// or, revision 3, struct vfs_ns_cap_data).
type FileCaps struct {
	Revision    int
	Effective   bool
	Permitted   uint64
	Inheritable uint64
	// RootID is the uid that is root of the user namespace the attribute
	// is for (revision 3 only): non-zero means the capabilities only apply
	// inside such a namespace, not on this host.
	RootID uint32
}

const (
	vfsCapRevisionMask = 0xFF000000
	vfsCapFlagsEff     = 0x000001
	vfsCapRevision1    = 0x01000000
	vfsCapRevision2    = 0x02000000
	vfsCapRevision3    = 0x03000000
)

// ParseFileCaps decodes the raw attribute.
func ParseFileCaps(b []byte) (FileCaps, error) {
	if len(b) < 4 {
		return FileCaps{}, fmt.Errorf("security.capability is %d bytes, too short", len(b))
	}
	le := binary.LittleEndian
	magic := le.Uint32(b)
	fc := FileCaps{Effective: magic&vfsCapFlagsEff != 0}
	want := 0
	switch magic & vfsCapRevisionMask {
	case vfsCapRevision1:
		fc.Revision, want = 1, 12
	case vfsCapRevision2:
		fc.Revision, want = 2, 20
	case vfsCapRevision3:
		fc.Revision, want = 3, 24
	default:
		return FileCaps{}, fmt.Errorf("security.capability has unknown revision %#x", magic&vfsCapRevisionMask)
	}
	if len(b) != want {
		return FileCaps{}, fmt.Errorf("security.capability revision %d is %d bytes, want %d", fc.Revision, len(b), want)
	}
	fc.Permitted = uint64(le.Uint32(b[4:]))
	fc.Inheritable = uint64(le.Uint32(b[8:]))
	if fc.Revision >= 2 {
		fc.Permitted |= uint64(le.Uint32(b[12:])) << 32
		fc.Inheritable |= uint64(le.Uint32(b[16:])) << 32
	}
	if fc.Revision == 3 {
		fc.RootID = le.Uint32(b[20:])
	}
	return fc, nil
}

// String prints the capabilities the way getcap does, e.g.
// "cap_net_admin,cap_sys_admin=ep".
func (fc FileCaps) String() string {
	if fc.Permitted == 0 && fc.Inheritable == 0 {
		return "(none)"
	}
	var parts []string
	if fc.Permitted != 0 {
		parts = append(parts, capList(fc.Permitted)+"="+effFlag(fc.Effective)+"p")
	}
	if fc.Inheritable != 0 {
		parts = append(parts, capList(fc.Inheritable)+"+i")
	}
	s := strings.Join(parts, " ")
	if fc.Revision == 3 && fc.RootID != 0 {
		s += fmt.Sprintf(" [rootid=%d]", fc.RootID)
	}
	return s
}

func effFlag(e bool) string {
	if e {
		return "e"
	}
	return ""
}

// capList names the capabilities in a mask, lowest number first.
func capList(mask uint64) string {
	var names []string
	for mask != 0 {
		n := bits.TrailingZeros64(mask)
		mask &^= 1 << n
		if n < len(capNames) {
			names = append(names, capNames[n])
		} else {
			names = append(names, fmt.Sprintf("cap_%d", n))
		}
	}
	return strings.Join(names, ",")
}

// parseCapMask reads a hex capability mask as /proc/PID/status prints it.
func parseCapMask(s string) (uint64, error) {
	var v uint64
	_, err := fmt.Sscanf(strings.TrimSpace(s), "%x", &v)
	return v, err
}
