#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for the workflow's cluster test
# (tests/test_slurm.py) and for trying profiles/slurm by hand. Needs root and Debian's
# slurm-wlm + munge (`install` gets them). No systemd: the daemons are started here, in the
# foreground under setsid, their PIDs recorded, and only those PIDs are stopped. Every file
# (config, munge key and socket, state, logs, fake GPU device nodes) lives in one directory,
# $NETTEBENCH_SLURM_DIR (default /tmp/nettebench-slurm). One file outside it, while the cluster
# runs: /etc/slurm/slurm.conf, a link to its config. The snakemake plugin's job step removes
# every SLURM_* variable (SLURM_CONF too) before it calls srun inside a job, so srun only finds
# a config at the default path; `start` refuses to replace a slurm.conf that is not its own.
#
#   tests/slurm/cluster.sh install   # apt-get install slurm-wlm munge, if missing
#   tests/slurm/cluster.sh start     # fresh cluster; prints the SLURM_CONF to export
#   tests/slurm/cluster.sh status    # daemons and the node's state
#   tests/slurm/cluster.sh stop      # cancel its jobs, stop its daemons (by recorded PID)
#
# What the configuration must say, learned the hard way:
# - no accounting database here, so `sacct` cannot answer: the snakemake plugin tracks jobs
#   with squeue, which it only trusts when MinJobAge >= 3x its first status-check delay; and
#   tests/test_slurm.py reads every job of a run with `scontrol show job` after the run, which
#   answers for a finished job only until MinJobAge has passed (an hour here);
# - GPUs are GRES backed by character devices (mknod ... c 1 3, like /dev/null): the node
#   offers $NETTEBENCH_SLURM_GPUS of them, so `--gpus=1` jobs schedule on a CPU-only machine;
# - DefMemPerCPU keeps a job without --mem from taking the whole node, EnforcePartLimits=ALL
#   makes an impossible request fail at submission instead of pending forever, and RealMemory
#   must stay below the real memory or the node is invalid.
set -euo pipefail

DIR=${NETTEBENCH_SLURM_DIR:-/tmp/nettebench-slurm}
GPUS=${NETTEBENCH_SLURM_GPUS:-2}
CTLD_PORT=${NETTEBENCH_SLURM_PORT:-6817}
NODE=$(hostname -s)
CONF=$DIR/etc/slurm.conf
SYSTEM_CONF=/etc/slurm/slurm.conf
export SLURM_CONF=$CONF

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

have_binaries() {
	command -v slurmctld >/dev/null && command -v slurmd >/dev/null &&
		command -v munged >/dev/null && command -v sbatch >/dev/null
}

install() {
	if have_binaries; then
		echo "slurm-wlm and munge already installed"
		return
	fi
	[ "$(id -u)" = 0 ] || die "installing slurm-wlm and munge needs root"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		slurm-wlm munge >/dev/null
}

write_config() {
	local cpus mem_mb
	cpus=$(nproc)
	# 85 % of the real memory: RealMemory above what slurmd measures makes the node invalid.
	mem_mb=$(awk '/^MemTotal/ {printf "%d", $2 / 1024 * 0.85}' /proc/meminfo)
	local gres="" gres_line=""
	if [ "$GPUS" -gt 0 ]; then
		local i
		for ((i = 0; i < GPUS; i++)); do
			mknod "$DIR/dev/fakegpu$i" c 1 3
		done
		gres="Gres=gpu:fake:$GPUS"
		gres_line="NodeName=$NODE Name=gpu Type=fake File=$DIR/dev/fakegpu[0-$((GPUS - 1))]"
	fi
	cat >"$CONF" <<EOF
# Written by tests/slurm/cluster.sh: a single-node cluster for nettebench's tests.
ClusterName=nettebench
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((CTLD_PORT + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.own.pid
SlurmdPidFile=$DIR/run/slurmd.own.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
JobRequeue=1
MinJobAge=3600
DefMemPerCPU=1024
EnforcePartLimits=ALL
KillWait=5
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb $gres State=UNKNOWN
PartitionName=main Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
	echo "$gres_line" >"$DIR/etc/gres.conf"
}

# Start a daemon in the foreground in its own session; record its PID.
spawn() {
	local name=$1
	shift
	setsid "$@" >"$DIR/log/$name.out" 2>&1 </dev/null &
	echo $! >"$DIR/run/$name.pid"
}

wait_for() {
	local what=$1 seconds=$2
	shift 2
	local deadline=$((SECONDS + seconds))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || {
			status >&2 || true
			die "$what did not come up within ${seconds}s (logs: $DIR/log/)"
		}
		sleep 0.5
	done
}

node_idle() {
	[ "$(sinfo -h -N -o %T)" = idle ]
}

start() {
	[ "$(id -u)" = 0 ] || die "the test cluster runs its daemons as root"
	have_binaries || die "slurm-wlm and munge are not installed: run '$0 install' (apt-get)"
	if [ -n "$(running_pids)" ]; then
		die "a cluster is already running from $DIR: '$0 stop' first"
	fi
	if [ -e "$SYSTEM_CONF" ] || [ -L "$SYSTEM_CONF" ]; then
		[ "$(readlink "$SYSTEM_CONF")" = "$CONF" ] ||
			die "$SYSTEM_CONF exists and is not this test cluster's: not touching a real cluster"
	fi
	rm -rf "$DIR"
	mkdir -p "$DIR"/{etc,munge,state,spool,log,run,dev}
	chmod 700 "$DIR" "$DIR/munge"
	dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
	chmod 400 "$DIR/munge/munge.key"
	write_config
	mkdir -p "$(dirname "$SYSTEM_CONF")"
	ln -sfn "$CONF" "$SYSTEM_CONF"

	spawn munged munged --foreground --force \
		--socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
		--pid-file="$DIR/munge/munged.pid" --seed-file="$DIR/munge/munged.seed" \
		--log-file="$DIR/log/munged.log"
	wait_for munged 10 test -S "$DIR/munge/munge.socket"
	spawn slurmctld slurmctld -D -f "$CONF"
	wait_for slurmctld 30 scontrol ping
	spawn slurmd slurmd -D -f "$CONF" -N "$NODE"
	wait_for "the node" 30 node_idle
	echo "cluster up: node $NODE, $(nproc) CPUs, $GPUS fake GPUs, state in $DIR"
	echo "export SLURM_CONF=$CONF"
}

running_pids() {
	local name pid
	for name in slurmd slurmctld munged; do
		[ -f "$DIR/run/$name.pid" ] || continue
		pid=$(cat "$DIR/run/$name.pid")
		# the recorded PID, and only while it still is that daemon (PIDs get reused)
		[ "$(ps -p "$pid" -o comm= 2>/dev/null)" = "$name" ] && echo "$name $pid"
	done
	return 0
}

stop() {
	if [ -z "$(running_pids)" ]; then
		echo "no cluster running from $DIR"
		unlink_conf
		return
	fi
	# Jobs first (their processes belong to slurmstepd, not to the daemons stopped below).
	if scontrol ping >/dev/null 2>&1; then
		scancel --full --signal=KILL --user=root 2>/dev/null || true
		scancel --user=root 2>/dev/null || true
		local deadline=$((SECONDS + 30))
		while [ -n "$(squeue -h -t RUNNING,COMPLETING,PENDING -o %i 2>/dev/null)" ] &&
			[ $SECONDS -lt $deadline ]; do
			sleep 0.5
		done
	fi
	local name pid
	running_pids | while read -r name pid; do
		kill "$pid"
		echo "stopped $name ($pid)"
	done
	local deadline=$((SECONDS + 15))
	while [ -n "$(running_pids)" ] && [ $SECONDS -lt $deadline ]; do
		sleep 0.2
	done
	running_pids | while read -r name pid; do
		kill -KILL "$pid"
		echo "killed $name ($pid)"
	done
	unlink_conf
}

unlink_conf() {
	if [ "$(readlink "$SYSTEM_CONF" 2>/dev/null)" = "$CONF" ]; then
		rm -f "$SYSTEM_CONF"
	fi
}

status() {
	running_pids
	sinfo -N -o "%N %T %c %m %G" 2>&1 || true
}

case ${1:-} in
install) install ;;
start) start ;;
stop) stop ;;
status) status ;;
*) die "usage: $0 install|start|stop|status (state in \$NETTEBENCH_SLURM_DIR, default $DIR)" ;;
esac
