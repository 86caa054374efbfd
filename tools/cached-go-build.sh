# Shared by the tools' build scripts (source it): build Go binaries once per machine and reuse them.
#
#   cached_go_build NAME OVERRIDE_VAR "KEY FILES" "BINARIES" BUILD_FUNCTION
#
# The binaries go to ${!OVERRIDE_VAR:-~/.cache/inference-portal/NAME}/<hash of the key files>/
# (outside the clone, so every clone on the machine shares them) and are rebuilt only when a key
# file changes; BUILD_FUNCTION is called with the folder to build into (static, trimmed, no VCS
# stamp). One build at a time on the machine: a second clone waits for the first instead of
# compiling beside it. Prints the folder. Exit status 2: no Go toolchain.
cached_go_build() {
  local name=$1 override=$2 key_files=$3 binaries=$4 build=$5
  local key cache out binary missing=0 start
  # shellcheck disable=SC2086  # the key files are a list
  key="$(cat $key_files | sha256sum | cut -c1-16)"
  cache="${!override:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-portal/$name}"
  out="$cache/$key"
  mkdir -p "$cache"
  exec 9>"$cache/.build.lock"
  flock 9
  for binary in $binaries; do [[ -x "$out/$binary" ]] || missing=1; done
  if [[ $missing == 1 ]]; then
    if ! command -v go >/dev/null 2>&1; then
      echo "go not found: install the Go toolchain (https://go.dev/doc/install, or Debian's golang-go)" >&2
      exit 2
    fi
    rm -rf "$out.partial" && mkdir -p "$out.partial"
    start=$(date +%s)
    echo "building $name into $out" >&2
    export CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath"
    "$build" "$out.partial"
    rm -rf "$out" && mv "$out.partial" "$out"
    echo "built in $(( $(date +%s) - start )) s" >&2
  fi
  echo "$out"
}
