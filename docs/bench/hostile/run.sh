#!/usr/bin/env bash
# Hostile reads and connections against `wow serve` (SQLite), each beside a victim on another
# client address (127.0.0.2), one fresh copy of a seeded store per attack.
#
# usage: docs/bench/hostile/run.sh LABEL path/to/wow ATTACK...
#   ATTACK: projection_bomb history_unread time_travel two_tenants idle_flood
# Seeds once (30,000 deposits on t1/hot; 2,000 accounts x 2 streams in tenants a1 and a2) into
# $WORK/seed.db with the binary given, unless it exists. Prints one JSON line per attack.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
label=$1; bin=$2; shift 2
WORK=${WORK:-/tmp/wow-attacks}
mkdir -p "$WORK"
wait_up() { for _ in $(seq 1 100); do curl -s -o /dev/null "127.0.0.1:$1/health" && return; sleep 0.1; done; }
if [ ! -f "$WORK/seed.db" ]; then
  "$bin" serve --store "sqlite://$WORK/seed.db" --listen 127.0.0.1:9300 > "$WORK/seed.log" 2>&1 &
  seeding=$!; wait_up 9300
  python3 "$here/seed.py" 9300 30000 2000
  kill "$seeding"; wait "$seeding" || true
fi
for attack in "$@"; do
  rm -f "$WORK"/run.db*; cp "$WORK/seed.db" "$WORK/run.db"
  "$bin" serve --store "sqlite://$WORK/run.db" --listen 127.0.0.1:9301 > "$WORK/serve-$label-$attack.log" 2>&1 &
  pid=$!; wait_up 9301
  echo -n "$label "; timeout 120 python3 "$here/attacks.py" "$pid" 9301 "$attack"
  kill "$pid"; wait "$pid" || true
done
