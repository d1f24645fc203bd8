#!/bin/bash
# Time to the first request of `wse materialize --parallel 4` over 4 WSE cells, against a fresh
# bench/fleet_server.py (64 slots), --no-cache, no source run: worker start-up and run start only.
# Needs a finished WSE fleet folder: `python bench/fleet.py --benchmarks wse --workdir <dir>`.
#   bash bench/fleet_start.sh <fleet workdir> [<checkout whose code runs; default: this one>]
# Prints the CLI's first lines with their time since the command started, then when the server saw
# the first request. Compare two checkouts back to back (the machine's load moves both).
set -euo pipefail
src=$(realpath "$1")/wse; code=$(realpath "${2:-$(dirname "$0")/..}")
py=${PYTHON:-python}
d=$(mktemp -d /tmp/wse-start-XXXX); cp -r "$src" "$d/"; rm -f "$d"/wse/*.lock
port=$($py -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])")
sed -i "s#$src#$d/wse#g; s#127.0.0.1:[0-9]*/v1#127.0.0.1:$port/v1#g" "$d/wse/wse.yaml"
$py "$(dirname "$0")/fleet_server.py" --port "$port" --slots 64 --median 0.4 --sigma 0.8 --log "$d/seq.jsonl" >/dev/null 2>&1 &
spid=$!; trap 'kill $spid 2>/dev/null; rm -rf "$d"' EXIT; sleep 3
s=$(date +%s.%N)
(cd "$code" && DAGSTER_HOME=$d/wse/dagster_home PYTHONPATH=$code PYTHONUNBUFFERED=1 $py -m wse_platform.cli \
  --config "$d/wse/wse.yaml" materialize --select group:wse_cells \
  --partition 'B1|fleet' 'B2|fleet' 'B3|fleet' 'B1+WMOD|fleet' --parallel 4 --no-status --no-cache 2>&1) |
  grep --line-buffered -v warehouse | while IFS= read -r l; do
    printf "%6.2f %s\n" "$(echo "$(date +%s.%N) - $s" | bc)" "${l:0:90}"; done | head -6 || true
$py -c "
import json; L=[json.loads(x) for x in open('$d/seq.jsonl') if x.strip()]
print('first request at', round(min(x['a'] for x in L) - $s, 1), 's; load', open('/proc/loadavg').read().split()[0])"
