#!/usr/bin/env bash
# The raw-SQL floor: what PostgreSQL itself does for the queue's work on this machine, with no
# framework in the way. Run it right before or after pgq's benchmark and compare in the same run.
# Prints `floor_<name> <jobs per second>` lines:
#   floor_enqueue_single_per_s  1 client, one single-row INSERT per transaction
#   floor_enqueue_bulk_per_s    1 client, 1000-row INSERT..SELECT per transaction (rows made server-side)
#   floor_drain_per_s           8 clients: claim 50 with FOR UPDATE SKIP LOCKED, then one UPDATE .. = ANY(ids)
# Needs pgbench (PostgreSQL's own) and a role that may create databases: PGHOST/PGPORT/PGUSER
# (default 127.0.0.1/5432/postgres, the server and role `bench` uses by default; PGPASSWORD if
# the server asks for one).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${PGHOST:=127.0.0.1}" "${PGPORT:=5432}" "${PGUSER:=postgres}"
export PGHOST PGPORT PGUSER
pgbench=$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -n 1)
[ -x "$pgbench" ] || { echo "floor.sh: pgbench not found" >&2; exit 2; }
db=pgq_floor_$$
secs=${FLOOR_SECONDS:-15}
createdb "$db"
trap 'dropdb --if-exists "$db" >/dev/null 2>&1 || true' EXIT
q() { psql -X -q -At -d "$db" -v ON_ERROR_STOP=1 -c "$1"; }
schema() { psql -X -q -d "$db" -v ON_ERROR_STOP=1 -f "$here/floor-sql/schema.sql" >/dev/null 2>&1; q "CHECKPOINT"; }
# A pgbench run that fails prints its output and stops the script: no rate is made up.
tps() {
    local out
    out=$("$pgbench" -n -M prepared "$@" "$db" 2>&1) || { echo "$out" >&2; exit 1; }
    grep -oP 'tps = \K[0-9.]+(?= \(without)' <<<"$out" || { echo "$out" >&2; exit 1; }
}

schema
t=$(tps -c 1 -j 1 -T "$secs" -f "$here/floor-sql/enqueue_single.sql")
printf 'floor_enqueue_single_per_s %.0f\n' "$t"
schema
t=$(tps -c 1 -j 1 -t 100 -f "$here/floor-sql/enqueue_bulk1000.sql")
awk -v t="$t" 'BEGIN{printf "floor_enqueue_bulk_per_s %.0f\n", t*1000}'
schema
q "INSERT INTO jobs (queue, priority, status, run_at, attempts, payload)
   SELECT 'default', 0, 'queued', now() - interval '1 second', 0, jsonb_build_object('n', g)
   FROM generate_series(1, 1000000) g"
q "VACUUM ANALYZE jobs"; q "CHECKPOINT"
t=$(tps -c 8 -j 2 -T "$secs" -f "$here/floor-sql/claim50_complete50.sql")
awk -v t="$t" 'BEGIN{printf "floor_drain_per_s %.0f\n", t*50}'
