#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the tests of the Slurm template (tests/test_slurm.py) and for
# trying a benchmark's array job before a real cluster. Needs root: it installs Debian's slurm-wlm and munge
# packages if they are missing, writes /etc/slurm/slurm.conf for this host and its CPUs, and starts munged,
# slurmctld and slurmd.
#   bash scripts/slurm-local.sh start    # install if needed, configure, start; prints how long it took
#   bash scripts/slurm-local.sh stop     # cancel every job and stop the three daemons
# Exit status 2 with one line on stderr where it cannot (not root, no apt-get, a daemon that does not start).
set -euo pipefail
what="${1:-start}"
fail() {
    echo "slurm-local: $*" >&2
    exit 2
}

stop() {
    scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    for daemon in slurmd slurmctld munged; do
        pkill -x "$daemon" 2>/dev/null || true
    done
    for _ in $(seq 50); do
        pgrep -x slurmd >/dev/null || pgrep -x slurmctld >/dev/null || pgrep -x munged >/dev/null || return 0
        sleep 0.1
    done
}

if [ "$what" = stop ]; then
    stop
    exit 0
fi
[ "$what" = start ] || fail "unknown command '$what': use start or stop"
[ "$(id -u)" = 0 ] || fail "needs root (to install slurm-wlm and munge and start their daemons)"
started=$(date +%s%N)

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || fail "slurm-wlm and munge are missing and there is no apt-get to install them"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || fail "apt-get update failed"
    apt-get install -y -qq slurm-wlm munge >/dev/null || fail "apt-get install slurm-wlm munge failed"
fi

# munge authenticates the daemons and the client commands to each other with a shared key.
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    head -c 1024 /dev/urandom >/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
fi
pgrep -x munged >/dev/null || su -s /bin/sh munge -c /usr/sbin/munged || fail "munged does not start"

host="$(hostname -s)"
cpus="$(nproc)"
install -d /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
conf="ClusterName=local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
# no cgroups: processes are tracked by their parent, which works inside containers too
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP"
if [ "$(cat /etc/slurm/slurm.conf 2>/dev/null)" != "$conf" ]; then
    echo "$conf" >/etc/slurm/slurm.conf
    pkill -x slurmd 2>/dev/null || true
    pkill -x slurmctld 2>/dev/null || true
    sleep 0.5
fi
pgrep -x slurmctld >/dev/null || slurmctld || fail "slurmctld does not start (see /var/log/slurm/slurmctld.log)"
pgrep -x slurmd >/dev/null || slurmd || fail "slurmd does not start (see /var/log/slurm/slurmd.log)"
for _ in $(seq 100); do
    if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
        elapsed_ms=$((($(date +%s%N) - started) / 1000000))
        echo "slurm-local: one node ($host, $cpus CPUs) up in $((elapsed_ms / 1000)).$((elapsed_ms % 1000 / 100)) s"
        exit 0
    fi
    # a node left down by an earlier stop comes back
    scontrol update nodename="$host" state=resume 2>/dev/null || true
    sleep 0.2
done
fail "the node did not come up in 20 s (see /var/log/slurm/slurmd.log)"
