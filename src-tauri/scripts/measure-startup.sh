#!/usr/bin/env bash
# Measures the desktop app against its budgets (design §5, issue 26): the first window painted
# under 1 s after launch (release build) and idle memory under 150 MB RSS. Not part of the test suite.
#
#   src-tauri/scripts/measure-startup.sh [RUNS]        (default 3, each of three launches; needs a
#                                                       release build:
#                                                       cargo build --release -p feishu-companion;
#                                                       FEISHU_COMPANION_BIN=path measures another)
#
# Each run launches target/release/feishu-companion under `xvfb-run -a` in demo mode with a
# fresh data folder and an in-memory master key twice: as a fresh install (no Python file, so the
# Python sandbox is never started) and with one Python file (which the app loads at start). Then,
# when it has been built, the empty_window example: the same Tauri, WebKitGTK, UI and window with
# no app behind it, which is the floor of the app's memory on this machine. It reads:
#   launch → page loaded  the app logs "first paint" when the main window's page has loaded
#                         (PageLoadEvent::Finished); measured here from the launcher's clock just
#                         before exec to the unix_ms in that line.
#   launch → UI painted   the UI invokes `ui_ready` after its first requestAnimationFrame; the app
#                         logs "ui ready" with its unix_ms.
#   launch → first Python call   the app logs "the Python sandbox is ready" (and how: the shipped
#                         compiled copy, the cache, or a compile) and "loaded the Python folder"
#                         once the Python file put in the fresh config folder ran in the sandbox.
#                         FEISHU_COMPANION_BIN=/usr/bin/feishu-companion measures an installed app.
#   RSS after 10 s        VmRSS of the app process, then summed with its children (WebKit's web and
#                         network processes). The sum counts pages shared between the processes
#                         once per process; PSS (proportional) splits them and is the fairer total.
#
#   EMPTY_WINDOW_BIN=path  the floor to run (default target/release/examples/empty_window; built
#                          by cargo build --release -p feishu-companion --example empty_window)
#
# Measured on the 2-core development VM (Debian 12, WebKitGTK 2.50, Xvfb, so Mesa's software GL),
# median of 5 runs of the installed release .deb (December 2026):
#   fresh install      page loaded 392 ms, UI painted 825 ms, RSS 190 MB (536 MB with WebKit's two
#                      processes, 357 MB PSS)
#   one Python file    UI painted 841 ms, first Python call done 365 ms, RSS 225 MB
#   empty window       RSS 158 MB (495 MB with WebKit's processes, 316 MB PSS)
# So the app's own share is 31 MB (its binary's pages 24 MB, heap and the like 6 MB), and 66 MB
# with the Python sandbox loaded; the floor itself is over the 150 MB budget: 43 MB of it is
# libLLVM, which Mesa's software GL loads into every GTK and WebKitGTK process under Xvfb (GTK's GLX
# probe and WebKit's EGL display each load it; GDK_GL=disable leaves WebKit's).
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=${1:-3}
app=${FEISHU_COMPANION_BIN:-target/release/feishu-companion}
empty=${EMPTY_WINDOW_BIN:-target/release/examples/empty_window}
if [ ! -x "$app" ]; then
  echo "measure-startup: $app is missing; run: cargo build --release -p feishu-companion" >&2
  exit 1
fi
for tool in xvfb-run awk; do
  command -v "$tool" >/dev/null || { echo "measure-startup: $tool is missing" >&2; exit 1; }
done

# The process and every process below it.
tree() {
  local pid=$1
  echo "$pid"
  for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do tree "$child"; done
}
kb() { awk -v key="$2:" '$1 == key { print $2 }' "/proc/$1/$3" 2>/dev/null || true; }

# One launch of $app on a fresh data folder; $1: "plain" (a fresh install: no Python file, so the
# sandbox is never started) or "python" (one Python file, which the app loads at start: loading
# runs it in the sandbox, so its end is the first Python call). Appends a line of figures to
# $work/results-$1.
launch() {
  local mode=$1 run=$2 dir log runner pid launched loaded painted now wait_ms
  dir=$(mktemp -d)
  log="$dir/app.log"
  if [ "$mode" = python ]; then
    # (--data-dir keeps the config folder, and python/, inside it.)
    mkdir -p "$dir/data/config/python"
    printf 'def hello(name: str) -> str:\n    """Greets someone."""\n    return "hi " + name\n' \
      >"$dir/data/config/python/hello.py"
  fi
  # $$ inside the inner shell becomes the app's pid at exec; its clock reading is the launch time.
  xvfb-run -a -s "-screen 0 1400x900x24" bash -c '
    echo $$ > "$1/pid"; date +%s%3N > "$1/launched"
    exec "$2" --data-dir "$1/data" --demo --ephemeral-keys' _ "$dir" "$app" >"$log" 2>&1 &
  runner=$!

  for _ in $(seq 1 300); do
    if grep -q "ui ready" "$log" 2>/dev/null &&
      { [ "$mode" = plain ] || grep -q "loaded the Python folder" "$log" 2>/dev/null; }; then
      break
    fi
    sleep 0.1
  done
  pid=$(cat "$dir/pid" 2>/dev/null || true)
  launched=$(cat "$dir/launched" 2>/dev/null || echo 0)
  loaded=$(sed -n 's/.*first paint:.*unix_ms=\([0-9]*\).*/\1/p' "$log" | head -1)
  painted=$(sed -n 's/.*ui ready:.*unix_ms=\([0-9]*\).*/\1/p' "$log" | head -1)
  if [ -z "$pid" ] || [ -z "$loaded" ]; then
    echo "run $run ($mode): the app did not paint; its log:" >&2
    cat "$log" >&2
    # xvfb-run ends (and stops its X server) once the app has.
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    wait "$runner" 2>/dev/null || true
    exit 1
  fi

  # Idle: 10 s after launch.
  now=$(date +%s%3N)
  wait_ms=$(( launched + 10000 - now ))
  [ "$wait_ms" -gt 0 ] && sleep "$(awk -v ms="$wait_ms" 'BEGIN { print ms / 1000 }')"
  memory "$pid"

  local py_ready py_called py_ready_ms=- py_source="not started" py_called_ms=-
  py_ready=$(sed -n 's/.*the Python sandbox is ready: \(.*\) in [0-9]* ms (unix_ms=\([0-9]*\)).*/\2 \1/p' "$log" | head -1)
  py_called=$(sed -n 's/.*loaded the Python folder:.*unix_ms=\([0-9]*\).*/\1/p' "$log" | head -1)
  [ -n "$py_ready" ] && py_ready_ms=$(( ${py_ready%% *} - launched )) && py_source="${py_ready#* }"
  [ -n "$py_called" ] && py_called_ms=$(( py_called - launched ))
  local loaded_ms=$(( loaded - launched )) painted_ms=-
  [ -n "$painted" ] && painted_ms=$(( painted - launched ))
  printf 'run %d (%s): launch→page loaded %5s ms · launch→UI painted %5s ms · RSS main %6.1f MB · RSS with children %6.1f MB · PSS with children %6.1f MB  (%s MB RSS/PSS)\n' \
    "$run" "$mode" "$loaded_ms" "$painted_ms" "$(mb "$main_rss")" "$(mb "$total_rss")" "$(mb "$total_pss")" "$names"
  [ "$mode" = python ] && printf '       launch→Python sandbox ready %5s ms (%s) · launch→first Python call done %5s ms\n' \
    "$py_ready_ms" "$py_source" "$py_called_ms"
  echo "$loaded_ms $painted_ms $main_rss $total_rss $total_pss $py_called_ms" >>"$work/results-$mode"

  kill "$pid" 2>/dev/null || true
  wait "$runner" 2>/dev/null || true
  rm -rf "$dir"
}

# The floor: the empty_window example (the same Tauri, WebKitGTK, UI and window size with no app
# behind it), 10 s after launch.
floor() {
  local run=$1 dir runner pid
  dir=$(mktemp -d)
  xvfb-run -a -s "-screen 0 1400x900x24" bash -c 'echo $$ > "$1/pid"; exec "$2"' _ "$dir" "$empty" \
    >"$dir/log" 2>&1 &
  runner=$!
  sleep 10
  pid=$(cat "$dir/pid" 2>/dev/null || true)
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    echo "floor run $run: the empty window did not start; its log:" >&2
    cat "$dir/log" >&2
    exit 1
  fi
  memory "$pid"
  printf 'floor %d (empty Tauri window): RSS main %6.1f MB · RSS with children %6.1f MB · PSS with children %6.1f MB  (%s MB RSS/PSS)\n' \
    "$run" "$(mb "$main_rss")" "$(mb "$total_rss")" "$(mb "$total_pss")" "$names"
  echo "- - $main_rss $total_rss $total_pss -" >>"$work/results-floor"
  kill "$pid" 2>/dev/null || true
  wait "$runner" 2>/dev/null || true
  rm -rf "$dir"
}

# Sets main_rss, total_rss, total_pss (kB) and names for a process and its children.
memory() {
  local p
  main_rss=$(kb "$1" VmRSS status)
  total_rss=0 total_pss=0 names=""
  for p in $(tree "$1"); do
    total_rss=$(( total_rss + $(kb "$p" VmRSS status || echo 0) ))
    total_pss=$(( total_pss + $(kb "$p" Pss smaps_rollup || echo 0) ))
    names="$names${names:+, }$(cat /proc/"$p"/comm 2>/dev/null) $(( $(kb "$p" VmRSS status || echo 0) / 1024 ))/$(( $(kb "$p" Pss smaps_rollup || echo 0) / 1024 ))"
  done
}
mb() { awk -v k="$1" 'BEGIN { print k / 1024 }'; }
over() { awk -v a="$1" -v b="$2" 'BEGIN { print (a - b) / 1024 }'; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for run in $(seq 1 "$runs"); do
  launch plain "$run"
  launch python "$run"
  if [ -x "$empty" ]; then floor "$run"; fi
done

# Medians, column by column (plain awk and sort: Debian's awk is mawk).
median() {
  awk -v i="$2" '{ print $i }' "$work/results-$1" | sort -n |
    awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
for mode in plain python; do
  printf 'median of %d, %-26s launch→page loaded %s ms · launch→UI painted %s ms (budget 1000) · RSS main %.1f MB (budget 150) · with children %.1f MB · PSS with children %.1f MB\n' \
    "$runs" "$([ "$mode" = plain ] && echo "a fresh install:" || echo "with one Python file:")" \
    "$(median "$mode" 1)" "$(median "$mode" 2)" "$(mb "$(median "$mode" 3)")" \
    "$(mb "$(median "$mode" 4)")" "$(mb "$(median "$mode" 5)")"
done
printf 'median of %d: launch→first Python call done %s ms (budget: under 1000 ms from install)\n' "$runs" "$(median python 6)"
if [ -f "$work/results-floor" ]; then
  printf 'median of %d, the empty Tauri window (the floor): RSS main %.1f MB · with children %.1f MB · PSS with children %.1f MB; the app over it: %.1f MB (fresh install), %.1f MB (one Python file)\n' \
    "$runs" "$(mb "$(median floor 3)")" "$(mb "$(median floor 4)")" "$(mb "$(median floor 5)")" \
    "$(over "$(median plain 3)" "$(median floor 3)")" "$(over "$(median python 3)" "$(median floor 3)")"
else
  echo "(no floor: build it with cargo build --release -p feishu-companion --example empty_window)"
fi
