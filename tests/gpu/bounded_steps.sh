# Sourced by the device scripts (tests/gpu/run_device_suite.sh, benchmarks/peers/run_peer_comparisons.sh).
# Needs STEPS (" name name ... "), START (the script's $SECONDS at its start), SUMMARY (the
# summary file) and RESULT_LINE (a grep -E pattern for the line of a log that says how it went).

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

step() {  # step NAME LOG COMMAND...: runs bounded, output in LOG, one line in SUMMARY; status 0 if it passed
  local name=$1 log=$2 began=$SECONDS rc last
  shift 2
  timeout "$(budget)" "$@" > "$log" 2>&1
  rc=$?
  last=$(grep -E "$RESULT_LINE" "$log" | tail -1 | cut -c1-160)
  echo "$name rc=$rc $((SECONDS - began))s ${last:-}" >> "$SUMMARY"
  [ "$rc" -eq 0 ]
}
