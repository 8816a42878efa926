// Package ownertest exposes the prelude's owner-file parser (owner.h) to Go
// tests without linking the privileged constructor of package prelude. It
// is imported only by its own tests.
//
// It must never be imported by a program.
package ownertest

/*
#cgo CFLAGS: -Wall -Wextra -Werror
#include <stdlib.h>
#include "../owner.h"
*/
import "C"

import "unsafe"

// PayloadID is SBX_PAYLOAD_ID's value, as the prelude passes it.
const PayloadID = 1000

// Parse runs sbx_parse_owner on b.
func Parse(b []byte) (uid, gid uint32, ok bool) {
	p := C.CBytes(b)
	defer C.free(p)
	var u, g C.unsigned
	if C.sbx_parse_owner((*C.char)(unsafe.Pointer(p)), C.size_t(len(b)), &u, &g) != 0 {
		return 0, 0, false
	}
	return uint32(u), uint32(g), true
}

// IDsOK runs sbx_owner_ids_ok.
func IDsOK(ouid, ogid, ruid, rgid, euid, egid uint32) bool {
	return C.sbx_owner_ids_ok(C.unsigned(ouid), C.unsigned(ogid), C.unsigned(ruid), C.unsigned(rgid),
		C.unsigned(euid), C.unsigned(egid), C.unsigned(PayloadID)) != 0
}
