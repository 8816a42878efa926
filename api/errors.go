package api

import "net/http"

// ErrorCode is one code of the closed set of API.md. Clients switch on it;
// a new code is a breaking change of the contract.
type ErrorCode string

// The error codes of API.md.
const (
	CodeInvalidArgument ErrorCode = "invalid_argument"
	// CodeUnauthenticated is a TCP request without a valid
	// "Authorization: Bearer <key>" (401); Unix-socket peers never get it.
	CodeUnauthenticated ErrorCode = "unauthenticated"
	CodeForbidden       ErrorCode = "forbidden"
	CodeNotFound        ErrorCode = "not_found"
	CodeConflict        ErrorCode = "conflict"
	CodeTooLarge        ErrorCode = "too_large"
	CodeQuotaExceeded   ErrorCode = "quota_exceeded"
	CodeLimitExceeded   ErrorCode = "limit_exceeded"
	CodeUnavailable     ErrorCode = "unavailable"
	CodeInternal        ErrorCode = "internal"
)

// Codes is the closed set, in API.md's order.
func Codes() []ErrorCode {
	return []ErrorCode{
		CodeInvalidArgument, CodeUnauthenticated, CodeForbidden, CodeNotFound, CodeConflict, CodeTooLarge,
		CodeQuotaExceeded, CodeLimitExceeded, CodeUnavailable, CodeInternal,
	}
}

// Status is the HTTP status API.md gives the code; an unknown code is
// answered as internal (500). The one answer whose status differs from its
// code's is a wrong method: 405 with invalid_argument.
func (c ErrorCode) Status() int {
	switch c {
	case CodeInvalidArgument:
		return http.StatusBadRequest
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeQuotaExceeded:
		return http.StatusInsufficientStorage
	case CodeLimitExceeded:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Known reports whether c is in the closed set.
func (c ErrorCode) Known() bool {
	for _, k := range Codes() {
		if c == k {
			return true
		}
	}
	return false
}

// ErrorBody is every non-2xx answer sandboxd produces.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody. Message is a sentence for humans;
// for 503 it ends with "; fix: <remedy>" where the host can be fixed.
type ErrorDetail struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
}
