#!/bin/bash
# The guest side of one host-matrix row (vm/README.md), run as root by the
# image's one-shot unit from the payload disk (/payload): install sandboxd
# from the checkout's bin/ the way an operator does, start it the way the
# row says, run the host-conformance suite against it, and write the
# results to /payload/results. The unit powers the machine off afterwards.
set -u
row=$(cat /payload/row)
res=/payload/results
mkdir -p "$res"
exec >"$res/row.log" 2>&1
start=$(date +%s)
say() { echo "[row $row +$(( $(date +%s) - start ))s] $*"; }
verdict() { # PASS|FAIL reason
  echo "$1 row=$row seconds=$(( $(date +%s) - start )) $2" > "$res/result"
  say "verdict: $1 $2"
  sync
  exit 0
}

say "kernel $(uname -r), $(stat -fc %T /sys/fs/cgroup) at /sys/fs/cgroup, systemd $(systemctl --version | head -1 | cut -d' ' -f2), bwrap $(bwrap --version | cut -d' ' -f2), node $(node --version), $(python3 --version)"
say "apparmor: $(cat /sys/module/apparmor/parameters/enabled 2>/dev/null || echo absent)"
# Install from a root-owned copy, as from a checkout (never from the payload
# disk itself). The data-science stack is not in the image: minimal.
cp -a /payload/src /opt/sandboxd-src
cd /opt/sandboxd-src
export SANDBOXD_ENVIRONMENTS=minimal
export SANDBOXD_HC_CGROUPS=v2
# 512 MiB per exec instead of the default 2 GiB: without KVM every page
# fault is emulated, and the suite's memory bomb must reach the limit
# within its minute. Set as an operator would: the unit's drop-in, or
# make run's environment.
export SANDBOXD_MEMORY=512MiB
# The reduced load's size: 24 execs (a third javascript) show a per-exec
# leak of descriptors, processes, cgroups or workspaces, at about 7 s each
# under TCG on a loaded 2-core host.
export SANDBOXD_HC_LOAD_N=24

start_unit() {
  scripts/install.sh || verdict FAIL "scripts/install.sh failed"
  install -m 0644 deploy/systemd/sandboxd.service /etc/systemd/system/
  mkdir -p /etc/systemd/system/sandboxd.service.d
  printf '[Service]\nEnvironment=SANDBOXD_MEMORY=%s\n' "$SANDBOXD_MEMORY" > /etc/systemd/system/sandboxd.service.d/vm-memory.conf
  systemctl daemon-reload
  systemctl enable --now sandboxd || { systemctl status sandboxd --no-pager; journalctl -u sandboxd --no-pager | tail -50; verdict FAIL "the unit did not start"; }
  export SANDBOXD_HC_RESTART="systemctl restart sandboxd"
}

# Row c: what `make run` does once deps and the build are done (the VM has
# neither network nor Go; the host built bin/): scripts/run.sh from
# install.sh on, from this root shell, no systemd unit for the supervisor.
# A SIGKILLed or stopped supervisor is started again by this loop, as an
# operator would run make run again. The loop runs in a scope of its own in
# user.slice, without Delegate=, as a root login session's shell does.
start_run_sh() {
  sed -e '/^[[:space:]]*scripts\/deps.sh$/d' -e '/^[[:space:]]*make --no-print-directory build$/d' scripts/run.sh > scripts/run-vm.sh
  grep -q '^[^#]*\(deps.sh\|make .*build\)' scripts/run-vm.sh && verdict FAIL "scripts/run.sh changed shape: vm/guest/row.sh cannot strip its deps and build steps"
  chmod +x scripts/run-vm.sh
  systemd-run --quiet --scope --slice=user.slice --unit=hc-root-shell -- bash -c '
    while [ ! -e /run/hc-stop ]; do
      scripts/run-vm.sh >> "$0/run-sh.log" 2>&1 &
      echo $! > /run/hc-supervisor.pid
      wait
      sleep 1
    done' "$res" &
  export SANDBOXD_HC_RESTART='kill -TERM $(cat /run/hc-supervisor.pid)'
}

case $row in
  a) start_unit ;;
  b)
    # The probe must work before the sysctl, or its refusal after proves nothing.
    setpriv --reuid=65534 --regid=65534 --clear-groups unshare -U true ||
      verdict FAIL "unshare -U fails for nobody even before the sysctl: the probe proves nothing"
    sysctl -w kernel.unprivileged_userns_clone=0
    if setpriv --reuid=65534 --regid=65534 --clear-groups unshare -U true 2>/dev/null; then
      verdict FAIL "unshare -U still works for an unprivileged user with kernel.unprivileged_userns_clone=0"
    fi
    say "unshare -U as nobody: refused, as intended"
    start_unit ;;
  c) start_run_sh ;;
  *) verdict FAIL "no such row '$row' in the guest" ;;
esac

for i in $(seq 1 120); do [ -S /run/sandboxd/sandboxd.sock ] && break; sleep 1; done
say "sandboxctl health:"; /usr/local/bin/sandboxctl health 2>&1 | head -20
say "sandboxctl doctor:"; /usr/local/bin/sandboxctl doctor 2>&1 | tail -25

say "host-conformance suite"
CI=true /payload/it.test -test.run "$(cat /payload/tests)" -test.v -test.count=1 -test.timeout 20m > "$res/go-test.log" 2>&1
rc=$?
say "suite exit $rc"
touch /run/hc-stop
case $row in a|b) journalctl -u sandboxd --no-pager | tail -80 > "$res/journal.log" ;; esac
if [ $rc = 0 ]; then verdict PASS "suite passed"; else verdict FAIL "suite exit $rc ($(grep -c '^--- FAIL' "$res/go-test.log") failed)"; fi
