#!/usr/bin/env bash
# A private one-node Slurm cluster on this machine, for the tests of the Slurm template (tests/test_slurm.py) and
# for trying a benchmark's array job before a real cluster. Everything it has lives in one folder: its slurm.conf,
# its munge key and socket, the controller's state, slurmd's spool, the logs and the pid files. Its daemons listen
# on ports that were free when it started, and only its own key opens them, so a Slurm this machine runs already
# goes on beside it; nothing outside the folder is written. Client commands reach it through SLURM_CONF.
#   bash scripts/slurm-local.sh install         # as root: Debian's slurm-wlm and munge, where they are missing
#   bash scripts/slurm-local.sh start [FOLDER]  # configure and start in FOLDER (default .slurm-local here)
#   export SLURM_CONF=FOLDER/slurm.conf         # sbatch, squeue, scontrol, scancel then talk to it
#   bash scripts/slurm-local.sh stop [FOLDER]   # cancel its jobs, end its three daemons (by their pids)
# start and stop need root (slurmd starts each job as its user). Exit status 2 with one line on stderr where it
# cannot (not root, the packages missing, a daemon that does not start).
set -euo pipefail
what="${1:-start}"
folder="${2:-.slurm-local}"
fail() {
    echo "slurm-local: $*" >&2
    exit 2
}

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
        return 0
    fi
    [ "$(id -u)" = 0 ] || fail "slurm-wlm and munge are missing; installing them needs root"
    command -v apt-get >/dev/null || fail "slurm-wlm and munge are missing and there is no apt-get to install them"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || fail "apt-get update failed"
    apt-get install -y -qq slurm-wlm munge >/dev/null || fail "apt-get install slurm-wlm munge failed"
    echo "slurm-local: installed slurm-wlm and munge"
}

case "$what" in
install)
    install_packages
    exit 0
    ;;
start | stop) ;;
*) fail "unknown command '$what': use install, start or stop" ;;
esac
[ "$(id -u)" = 0 ] || fail "needs root (slurmd starts each job as the user who submitted it)"
folder="$(realpath -m "$folder")"
# slurmd makes unix sockets in its spool folder, whose paths may be 108 bytes at most
[ "$what" = stop ] || [ "${#folder}" -le 64 ] ||
    fail "the folder's path is longer than 64 characters (slurmd's sockets go in it): $folder"
[ "$what" = stop ] || mkdir -p "$folder"
[ -d "$folder" ] || fail "no cluster in $folder (no such folder)"
conf="$folder/slurm.conf"

# The pid in pid file $1 if that process is alive and is this folder's $2 (its command line names this folder:
# a pid the system gave to another process since is never taken for ours).
our_pid() {
    local pid
    pid="$(cat "$folder/run/$1" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$folder/" || return 1
    echo "$pid"
}

stop() {
    if our_pid slurmctld.pid slurmctld >/dev/null; then
        # its jobs first: slurmd leaves a job's processes running when it ends
        local jobs
        jobs="$(SLURM_CONF="$conf" squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')" || true
        if [ -n "${jobs// /}" ]; then
            # shellcheck disable=SC2086
            SLURM_CONF="$conf" scancel --quiet $jobs 2>/dev/null || true
            for _ in $(seq 100); do
                [ -z "$(SLURM_CONF="$conf" squeue -h -o %A 2>/dev/null)" ] && break
                sleep 0.1
            done
        fi
    fi
    local pids=() pid
    for daemon in slurmd slurmctld munged; do
        if pid="$(our_pid "$daemon.pid" "$daemon")"; then
            kill "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    for _ in $(seq 100); do
        local alive=0
        for pid in "${pids[@]}"; do
            [ -d "/proc/$pid" ] && alive=1
        done
        [ "$alive" = 0 ] && return 0
        sleep 0.1
    done
    fail "a daemon of $folder did not end in 10 s: pids ${pids[*]}"
}

if [ "$what" = stop ]; then
    [ -f "$conf" ] || fail "no cluster in $folder (no slurm.conf there)"
    stop
    exit 0
fi

command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null ||
    fail "slurm-wlm and munge are not installed: run 'bash scripts/slurm-local.sh install' as root"
if our_pid slurmctld.pid slurmctld >/dev/null || our_pid slurmd.pid slurmd >/dev/null; then
    fail "a cluster runs in $folder already: stop it first with 'bash scripts/slurm-local.sh stop $folder'"
fi
started=$(date +%s%N)
host="$(hostname -s)"
cpus="$(nproc)"

# Fresh state each start: the jobs of an earlier cluster in this folder are gone with it.
rm -rf "$folder/state" "$folder/spool" "$folder/run" "$folder/munge"
install -d -m 0700 "$folder/state" "$folder/spool" "$folder/run" "$folder/log" "$folder/munge"
chmod 0700 "$folder"

# munge authenticates the daemons and the client commands to each other with a key they share: a key and a
# munged of this cluster's own. --force: munged would refuse a socket whose folder other users cannot enter,
# which is the point here (root alone uses this cluster).
head -c 1024 /dev/urandom >"$folder/munge/munge.key"
chmod 0400 "$folder/munge/munge.key"
socket="$folder/munge/munge.socket"
munged --force --socket="$socket" --key-file="$folder/munge/munge.key" --pid-file="$folder/run/munged.pid" \
    --log-file="$folder/log/munged.log" --seed-file="$folder/munge/munged.seed" 2>>"$folder/log/munged.log" ||
    fail "munged does not start (see $folder/log/munged.log)"

# Two ports free now, one for slurmctld and one for slurmd.
read -r ctld_port slurmd_port < <(python3 -c '
import socket
held = [socket.socket() for _ in range(2)]
for s in held:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in held))') || fail "python3 is needed to find two free ports"

cat >"$conf" <<EOF
ClusterName=slurmlocal
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
CommunicationParameters=NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
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
StateSaveLocation=$folder/state
SlurmdSpoolDir=$folder/spool
SlurmctldLogFile=$folder/log/slurmctld.log
SlurmdLogFile=$folder/log/slurmd.log
SlurmctldPidFile=$folder/run/slurmctld.pid
SlurmdPidFile=$folder/run/slurmd.pid
PlugStackConfig=$folder/plugstack.conf
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
: >"$folder/plugstack.conf"
export SLURM_CONF="$conf"
# -i: ignore any state (there is none: the folder is fresh); both read only this folder's slurm.conf
slurmctld -i -f "$conf" || { stop; fail "slurmctld does not start (see $folder/log/slurmctld.log)"; }
slurmd -f "$conf" || { stop; fail "slurmd does not start (see $folder/log/slurmd.log)"; }
for _ in $(seq 100); do
    if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
        elapsed_ms=$((($(date +%s%N) - started) / 1000000))
        echo "slurm-local: one node ($host, $cpus CPUs) up in $((elapsed_ms / 1000)).$((elapsed_ms % 1000 / 100)) s;" \
            "use it with: export SLURM_CONF=$conf"
        exit 0
    fi
    sleep 0.2
done
stop
fail "the node did not come up in 20 s (see $folder/log/slurmd.log)"
