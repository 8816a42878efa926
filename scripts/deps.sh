#!/usr/bin/env bash
# Installs the system packages sandboxd needs on Debian 12. Idempotent:
# installs only what is missing, runs apt-get update at most once.
#
#   scripts/deps.sh        what building and running need (make run, make deps)
#   scripts/deps.sh --dev  that plus what developing and testing need
#                          (make deps-dev, which make test and make lint use)
set -euo pipefail

dev=0
[ "${1:-}" = --dev ] && dev=1

need=()
want() {
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
  done
}
# Running: bubblewrap, the helper's libseccomp and file capabilities
# (libcap2-bin: setcap), the runtimes, setpriv (util-linux). Building:
# the helper's cgo and the static shims (gcc, libc6-dev, libseccomp-dev).
# python3-matplotlib/-pandas/-numpy: the Python kernel's rich outputs.
want bubblewrap libseccomp-dev libseccomp2 libcap2-bin python3 nodejs gcc libc6-dev util-linux make \
  python3-matplotlib python3-pandas python3-numpy
# The python-datascience environment (scripts/environments.sh) and its CJK
# fonts, unless SANDBOXD_ENVIRONMENTS=minimal. pypdf is python3-pypdf on
# Debian 12 (3.4.1; python3-pypdf2 is the older PyPDF2).
if [ "${SANDBOXD_ENVIRONMENTS:-datascience}" != minimal ]; then
  want python3-scipy python3-sklearn python3-seaborn python3-plotly python3-openpyxl python3-xlsxwriter \
    python3-docx python3-reportlab python3-pypdf weasyprint python3-pil fonts-noto-cjk
fi
if [ "$dev" = 1 ]; then
  # systemd: systemd-analyze, which `make check-deploy` uses to verify the
  # unit; apparmor: apparmor_parser, which compiles the AppArmor profile
  # offline there; python3-requests/-pip: the egress integration test
  # (requests, pip download through the proxy).
  want systemd apparmor python3-requests python3-pip
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "deps: Go is required (go 1.26.8 or newer on PATH, as go.mod says)" >&2; exit 1; }
[ "$dev" = 1 ] || exit 0

# golangci-lint for `make lint`, at a pinned version, built from the Go module
# proxy only when that version is not installed already.
GOLANGCI_LINT_VERSION=v2.15.0
gobin="$(go env GOBIN)"
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
if ! "$gobin/golangci-lint" version 2>/dev/null | grep -q "version ${GOLANGCI_LINT_VERSION#v} "; then
  echo "deps: installing golangci-lint $GOLANGCI_LINT_VERSION (go install, a few minutes)"
  go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
fi
