# Sourced by the benchmark scripts: starts a simulator and the whole platform (no embedded
# worker) on free ports, creates team `bench` and its key. Sets PY, SIM_PORT, GATEWAY_PORT,
# KEY; stops everything on exit. Inputs: SERVER (uvicorn|daphne), SIM_OPTIONS, MAX_IN_FLIGHT.
PY=.venv/bin/python
VAR=$PWD/var/bench-$(basename "$0")-$SERVER
SIM_PORT=$($PY -c 'from foundation.embedded_redis import free_port; print(free_port())')
GATEWAY_PORT=$($PY -c 'from foundation.embedded_redis import free_port; print(free_port())')
export SLUICE_VAR_DIR=$VAR SECRET_KEY=${SECRET_KEY:-bench-only-secret-key-0123456789-abcdefghijklmnop}
rm -rf "$VAR"

cleanup() { kill -INT "${LAUNCHER:-}" "${SIM:-}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

# shellcheck disable=SC2086  # SIM_OPTIONS is a list of options
$PY -m inference.sim --port "$SIM_PORT" --profile h100-llama3-8b --model sim \
    ${SIM_OPTIONS---fixed-ttft-ms 50 --fixed-itl-ms 10} & SIM=$!
SLUICE_SERVER=$SERVER SLUICE_EMBEDDED_WORKER=0 SLUICE_WORKERS="sim@http://127.0.0.1:$SIM_PORT" \
    PORT=$GATEWAY_PORT $PY -m gateway.launcher > "$VAR.log" 2>&1 & LAUNCHER=$!
for _ in $(seq 120); do
    curl -sf "http://127.0.0.1:$GATEWAY_PORT/readyz" | grep -q '"routable_workers": [1-9]' && break
    sleep 0.5
done
$PY manage.py create_team bench > /dev/null 2>&1
# The gateway keeps at most this many requests in flight per worker (its batch target;
# default 64) and queues the rest: set it to the simulated GPU's 256 sequences to measure
# relaying rather than admission control.
$PY manage.py shell -c "from inference.models import ModelDeployment as D; \
D.objects.filter(name='sim').update(max_in_flight_per_worker=${MAX_IN_FLIGHT:-64})"
sleep 2  # the scraper republishes the limit within a second
KEY=$($PY manage.py create_api_key bench 2>/dev/null | grep -o 'sk-sluice-[A-Za-z0-9-]*' | head -1)
