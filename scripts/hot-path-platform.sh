# Sourced by scripts/bench-hot-path and scripts/bench-gateway-cpu: starts this checkout's
# platform (`make run` without the embedded worker, a team without limits, port $PORT,
# default 8100) routing model `fake` to the gwbench harness's upstream, everything
# server-side pinned to the harness's SERVER_CPUS. Expects GWB (the harness) and OUT; sets
# KEY, TARGET and LAUNCHER, and defines restart_upstream and ready.
export GWB_WORK=${GWB_WORK:-/tmp/gwbench} DURATION=${DURATION:-10} WARMUP=2 REPEATS=1
export JSON_OUT=$OUT/runs.jsonl
PORT=${PORT:-8100}
# shellcheck source=/dev/null
. "$GWB/common.sh"

export SLUICE_VAR_DIR=$OUT/var SECRET_KEY=bench-only-secret-key-0123456789-abcdefghijklmnop
rm -rf "$SLUICE_VAR_DIR"
restart_upstream() {
  stop_upstream 2>/dev/null || true
  UPSTREAM_CHUNKS=$1 start_upstream
}
restart_upstream 1
SLUICE_EMBEDDED_WORKER=0 SLUICE_WORKERS="fake@$UPSTREAM_URL" PORT=$PORT \
  setsid taskset -c "$SERVER_CPUS" .venv/bin/python -m gateway.launcher >"$OUT/sluice.log" 2>&1 </dev/null &
LAUNCHER=$!
trap 'kill -INT -- -$LAUNCHER 2>/dev/null; stop_upstream' EXIT
for _ in $(seq 240); do
  curl -sf "http://127.0.0.1:$PORT/readyz" | grep -q '"routable_workers": [1-9]' && break
  sleep 0.5
done
.venv/bin/python manage.py create_team gwbench --unlimited >/dev/null
.venv/bin/python manage.py shell -c "from inference.models import ModelDeployment as D; \
D.objects.filter(name='fake').update(max_in_flight_per_worker=256)" >/dev/null
KEY=$(.venv/bin/python manage.py create_api_key gwbench 2>/dev/null | tail -1)

ready() {  # a real request answers 200 (the scraper re-admits a restarted upstream)
  for _ in $(seq 60); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v1/chat/completions" \
      -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
      -d '{"model":"fake","messages":[{"role":"user","content":"ready?"}],"max_tokens":2}')
    [ "$code" = 200 ] && return 0
    sleep 0.5
  done
  echo "Sluice does not answer on :$PORT" >&2
  return 1
}
TARGET=http://127.0.0.1:$PORT
