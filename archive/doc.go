// Package archive owns where workspace archives are stored: the Store
// interface, a local backend (a directory under the state directory) and
// an S3 backend (any S3 API: AWS, MinIO, Ceph RGW, versitygw), the
// retention and per-caller budget over any Store, and the counters behind
// the archive metrics and the health check.
//
// An archive is named by a Key: the owner's caller identity ("uid:<n>" or
// "key:<name>") and the sha256 of owner and session key together, so no
// caller-chosen string ever becomes a path or an object name and one
// caller cannot restore another's archive by guessing its key.
// Every archive is stored with its size and sha256; Get verifies both
// before it hands out a single byte, so nothing half-written or altered is
// ever restored.
//
// This package must never hold a whole archive in memory (archives are
// streamed through a spool file on local disk), never log, audit or echo a
// credential (errors from the S3 backend are scrubbed of the access key and
// the secret before they leave it), and never take a credential from a
// request: only the operator's file or environment supplies one.
package archive
