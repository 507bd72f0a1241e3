# Sourced by the device scripts (tests/gpu/run_device_suite.sh, benchmarks/peers/run_peer_comparisons.sh).
# Needs STEPS (" name name ... ") and START (the script's $SECONDS at its start).

wanted() { [[ "$STEPS" == *" $1 "* ]]; }

budget() {  # seconds a step may take: STEP_TIMEOUT, cut to what DEADLINE (since START) leaves
  local limit=${STEP_TIMEOUT:-600}
  if [ -n "${DEADLINE:-}" ]; then
    local left=$((DEADLINE - (SECONDS - START)))
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  [ "$limit" -lt 1 ] && limit=1
  echo "$limit"
}
