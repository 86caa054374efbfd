# Sourced by the Go build scripts (tools/go-build.sh, tools/kube-control-plane/build.sh): one build
# at a time per cache folder, and a build that says what it is doing. A first build takes minutes
# (the control plane about 10 on 2 cores) and a second clone waits for the first: both used to be
# silent for as long as they took (issue 43: 26 minutes waiting on a lock, nothing said).

# take_build_lock <cache folder> <what>: holds the folder's lock on fd 9 until the script ends; when
# another build holds it, says whose it is and that it waits, then waits.
take_build_lock() {
  local folder="$1" what="$2"
  exec 9>>"$folder/.build.lock"  # appended, never truncated: the holder's note is in .build.owner
  if ! flock -n 9; then
    local owner="a process that left no note"
    [[ -s "$folder/.build.owner" ]] && owner="$(cat "$folder/.build.owner")"
    echo "waiting for another build of $what to finish: $owner (lock: $folder/.build.lock)" >&2
    local since=$SECONDS
    flock 9
    echo "the other build of $what finished after $(( SECONDS - since )) s of waiting" >&2
  fi
  echo "pid $$ ($(ps -o args= -p "$PPID" 2>/dev/null | cut -c1-120)) in $(pwd), since $(date -u +%H:%M:%SZ)" \
    >"$folder/.build.owner"
}

# go_build <label> <dir> <go build arguments...>: `go build -v` in <dir>, saying every
# BUILD_PROGRESS_SECONDS (default 30) how far it got (modules downloaded, packages compiled); its
# output goes to stderr only if it fails.
go_build() {
  local label="$1" dir="$2"
  shift 2
  local log
  log="$(mktemp)"
  local start=$SECONDS last=$SECONDS every="${BUILD_PROGRESS_SECONDS:-30}"
  (cd "$dir" && go build -v "$@") 2>"$log" &
  local build=$!
  while kill -0 "$build" 2>/dev/null; do
    sleep 1
    if (( SECONDS - last >= every )); then
      local downloaded compiled
      downloaded=$(grep -c '^go: downloading' "$log" || true)
      compiled=$(grep -vc '^go: ' "$log" || true)
      echo "  $label: $downloaded modules downloaded, $compiled packages compiled, $(( SECONDS - start )) s" >&2
      last=$SECONDS
    fi
  done
  if ! wait "$build"; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  echo "  $label: built in $(( SECONDS - start )) s" >&2
}
