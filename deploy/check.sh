#!/usr/bin/env bash
# `make check-deploy`: validates the deployment recipes offline. Part of
# `make test`. Needs Go (tools are pinned in deploy/tools/go.mod and come
# from the Go module proxy) and, for the unit, systemd-analyze (Debian
# package systemd; scripts/deps.sh --dev installs it). Under CI=true nothing is
# skipped: a missing tool fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
GO=${GO:-go}
tools() { "$GO" -C deploy/tools "$@"; }

echo "check-deploy: tools module"
tools vet ./...
# The checkers' own tests feed them the shipped recipes with seccomp or
# AppArmor turned off in every place Compose and Kubernetes read it
# (seccomp/apparmor =/: unconfined, privileged, a neighbour service, pod and
# container securityContext, the older annotations): each must be refused.
tools test -count=1 ./composecheck ./manifestcheck

echo "check-deploy: compose (compose-spec loader and schema, as docker compose config)"
tools run ./composecheck -profile "$root/profiles/kubernetes-worker.json" "$root/deploy/compose/compose.yaml"
if docker compose version >/dev/null 2>&1; then
  (cd deploy/compose && docker compose config --quiet) && echo "check-deploy: docker compose config: ok"
else
  echo "check-deploy: docker compose config: skipped, no compose plugin here (composecheck above uses the same loader and schema)"
fi

echo "check-deploy: image (Dockerfile keeps the privileged-file guard)"
# No Docker engine here to build the image: check that its last step still
# strips setuid/setgid bits, fails on any other setuid/setgid or
# file-capability file, and pins the helper's exact capabilities and group.
df=deploy/compose/Dockerfile
for want in 'find / -xdev -type f -perm /6000 -exec chmod ug-s' \
            'bad_bits=$(find / -xdev -type f -perm /6000 -print)' \
            "grep -v '^/usr/local/libexec/sandboxd/sandboxd-nsinit '" \
            '*" cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin=p")' \
            'setcap cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin+p /usr/local/libexec/sandboxd/sandboxd-nsinit' \
            'chown root:sandboxd-helper /usr/local/libexec/sandboxd/sandboxd-nsinit'; do
  grep -qF -- "$want" "$df" || { echo "check-deploy: $df lost: $want" >&2; exit 1; }
done
echo "check-deploy: image guard: ok"

echo "check-deploy: kubernetes (kubeconform, vendored Kubernetes $(sed -n 2p deploy/kubernetes/schemas/SOURCE | cut -d' ' -f2) schemas, offline)"
tools tool kubeconform -strict -summary \
  -schema-location "$root/deploy/kubernetes/schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
  "$root"/deploy/kubernetes/*.yaml
tools run ./manifestcheck "$root/deploy/kubernetes"

echo "check-deploy: the checkers refuse unconfined (a copy of each recipe with it set must fail)"
neg=$(mktemp -d)
cp -r deploy/kubernetes "$neg/k8s"
sed -i 's/^\( *\)type: Localhost$/\1type: Unconfined/' "$neg/k8s/20-deployment.yaml"
if tools run ./manifestcheck "$neg/k8s" >/dev/null 2>&1; then echo "check-deploy: manifestcheck accepted an Unconfined profile" >&2; exit 1; fi
cp deploy/compose/compose.yaml deploy/compose/kubernetes-worker.json "$neg/"
sed -i 's/apparmor=sandboxd/apparmor=unconfined/' "$neg/compose.yaml"
if tools run ./composecheck -profile "$root/profiles/kubernetes-worker.json" "$neg/compose.yaml" >/dev/null 2>&1; then echo "check-deploy: composecheck accepted apparmor=unconfined" >&2; exit 1; fi
rm -rf "$neg"
echo "check-deploy: unconfined refused: ok"

echo "check-deploy: AppArmor profile (apparmor_parser -QTK: compiled, never loaded)"
if command -v apparmor_parser >/dev/null; then
  apparmor_parser -QTK profiles/apparmor/sandboxd 2>&1 | grep -v '^Cache read/write disabled' >&2 || true
  apparmor_parser -QTK profiles/apparmor/sandboxd 2>/dev/null || { echo "check-deploy: profiles/apparmor/sandboxd does not compile" >&2; exit 1; }
  grep -q '^profile sandboxd ' profiles/apparmor/sandboxd || { echo "check-deploy: the profile is not named sandboxd, as the recipes reference it" >&2; exit 1; }
  echo "check-deploy: apparmor_parser: ok"
elif [ "${CI:-}" = true ]; then
  echo "check-deploy: apparmor_parser missing (apt-get install apparmor)" >&2; exit 1
else
  echo "check-deploy: apparmor_parser: skipped, not installed (apt-get install apparmor)"
fi

echo "check-deploy: systemd (systemd-analyze verify)"
if ! command -v systemd-analyze >/dev/null; then
  if [ "${CI:-}" = true ]; then echo "check-deploy: systemd-analyze missing (apt-get install systemd)" >&2; exit 1; fi
  echo "check-deploy: systemd-analyze: skipped, not installed (apt-get install systemd)"
  exit 0
fi
# verify wants ExecStart's binary to exist: check a copy that points at the
# one `make build` made. Any output (an unknown key, a bad value) fails.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
[ -x bin/sandboxd ] || { echo "check-deploy: bin/sandboxd missing: run make build" >&2; exit 1; }
sed "s#^ExecStart=/usr/local/bin/sandboxd#ExecStart=$root/bin/sandboxd#" deploy/systemd/sandboxd.service > "$tmp/sandboxd.service"
out=$(SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --man=no "$tmp/sandboxd.service" 2>&1) || { echo "$out" >&2; exit 1; }
if [ -n "$out" ]; then echo "$out" >&2; echo "check-deploy: systemd-analyze verify warned" >&2; exit 1; fi
echo "check-deploy: systemd-analyze verify: ok"
if out=$(systemd-analyze security --offline=yes "$tmp/sandboxd.service" 2>/dev/null | tail -n 1); then
  echo "check-deploy: systemd-analyze security: ${out#*→ }"
fi
