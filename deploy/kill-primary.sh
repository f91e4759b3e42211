#!/usr/bin/env bash
# Kills the current primary's postmaster with SIGKILL (as a crash would) and measures, from the
# kill: when Patroni reports another node as primary (its REST `/primary` answers 200), and
# when a write (an INSERT, committed) first succeeds through HAProxy and through pgBouncer.
#
# Usage: deploy/kill-primary.sh [--with-patroni]
#   (after `cargo xtask cluster up`; run as root or as postgres)
# The cluster's URLs are read from target/cluster/urls.env (REBILL_CLUSTER_ENV overrides the
# path). Patroni then brings the old primary back as a standby by itself (rewound if needed).
# --with-patroni kills that node's Patroni too, first (a whole node dying): the standby then
# waits for the leader key to expire (ttl); `cargo xtask cluster up` starts the node again.
set -euo pipefail

env_file=${REBILL_CLUSTER_ENV:-$(dirname "$0")/../target/cluster/urls.env}
set -a; . "$env_file"; set +a
psql=/usr/lib/postgresql/15/bin/psql
now_ms() { date +%s%3N; }
status_of() { curl -s -o /dev/null -m 1 -w '%{http_code}' -X OPTIONS "$1/primary" || true; }

primary=""
for node in ${REBILL_CLUSTER_NODES//,/ }; do
    var="REBILL_CLUSTER_${node^^}_PATRONI"
    if [ "$(status_of "${!var}")" = 200 ]; then primary=$node; fi
done
[ -n "$primary" ] || { echo "no primary answers /primary" >&2; exit 1; }
pid=$(head -n 1 "$REBILL_CLUSTER_DIR/$primary/data/postmaster.pid")
patroni_pid=$(cat "$REBILL_CLUSTER_DIR/run/$primary.pid")

# The write every probe makes; a table of its own in the postgres database.
write="INSERT INTO failover_probe DEFAULT VALUES"
PGCONNECT_TIMEOUT=2 "$psql" -X -q -d "$REBILL_CLUSTER_HAPROXY_ADMIN_URL" \
    -c "CREATE TABLE IF NOT EXISTS failover_probe (at timestamptz NOT NULL DEFAULT now())" 2>/dev/null
for url in "$REBILL_CLUSTER_HAPROXY_ADMIN_URL" "$REBILL_CLUSTER_PGBOUNCER_ADMIN_URL"; do
    PGCONNECT_TIMEOUT=2 "$psql" -X -q -d "$url" -c "$write" >/dev/null
done

# Polls `probe` (a command) every 100 ms until it succeeds; prints the milliseconds since $t0.
until_ok() {
    local label=$1; shift
    local tries=0
    until "$@" >/dev/null 2>&1; do
        tries=$((tries + 1))
        [ $(( $(now_ms) - t0 )) -lt 120000 ] || { echo "$label: no success within 120 s"; return 1; }
        sleep 0.1
    done
    echo "$label: $(( $(now_ms) - t0 )) ms after the kill ($tries failed attempts)"
}
promoted() {
    for node in ${REBILL_CLUSTER_NODES//,/ }; do
        [ "$node" = "$primary" ] && continue
        var="REBILL_CLUSTER_${node^^}_PATRONI"
        [ "$(status_of "${!var}")" = 200 ] && return 0
    done
    return 1
}
write_through() {
    # (no PGOPTIONS: pgBouncer 1.18 refuses the `options` startup parameter)
    PGCONNECT_TIMEOUT=1 timeout 3 "$psql" -X -q -d "$1" -c "$write"
}

t0=$(now_ms)
if [ "${1:-}" = --with-patroni ]; then
    kill -9 "$patroni_pid"
    echo "primary: $primary, Patroni pid $patroni_pid and postmaster pid $pid; kill -9 at $(date -u +%H:%M:%S.%3N)"
else
    echo "primary: $primary, postmaster pid $pid; kill -9 at $(date -u +%H:%M:%S.%3N)"
fi
kill -9 "$pid"
until_ok "Patroni: another node answers /primary" promoted &
until_ok "first committed write through HAProxy " write_through "$REBILL_CLUSTER_HAPROXY_ADMIN_URL" &
until_ok "first committed write through pgBouncer" write_through "$REBILL_CLUSTER_PGBOUNCER_ADMIN_URL" &
wait
