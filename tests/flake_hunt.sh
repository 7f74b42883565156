#!/usr/bin/env bash
# The flake hunt (docs/testing.md): the whole suite, again and again, on a fresh clone with a fresh HOME (no git
# identity, no ~/.gitconfig), while both cores are kept busy; then the named tests, 20 times each, under the same load.
#   bash tests/flake_hunt.sh [RUNS] [REPEATS]      (defaults: 5 runs, 20 repeats)
#   HUNT_PARTS=full|named bash tests/flake_hunt.sh  (only the full runs, or only the named tests)
#   HUNT_LOAD=0 ...                                  (no load of its own: another hunt keeps the cores busy)
#   HUNT_NEWCOMER=1 ...                              (as a newcomer: a fresh venv's python and `env -i`, a PATH
#                                                     without uv, bubblewrap, ripgrep, sshd, xfsprogs and node; the
#                                                     README's two commands)
# It prints every run's closing line and the failures of a red one, and the longest streak of green runs.
set -uo pipefail
runs=${1:-5}
repeats=${2:-20}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/eukhe-hunt-XXXXXX)
git clone -q "$here" "$work/p"
[ -d "$here/../shared" ] && cp -r "$here/../shared" "$work/shared"
home=$(mktemp -d /tmp/eukhe-hunt-home-XXXXXX)
cd "$work/p" || exit 1
if [ "${HUNT_NEWCOMER:-0}" = 1 ]; then
  # A PATH of this machine's commands less the ones the README's two commands do not install.
  # Outside /tmp: a confined kernel sees its session's own /tmp, so an interpreter reached through a link under the
  # machine's /tmp would not be found there.
  tools=$(mktemp -d /var/tmp/eukhe-newcomer-bin-XXXXXX)
  for dir in /usr/local/bin /usr/bin /bin /usr/sbin /sbin; do
    for tool in "$dir"/*; do
      name=$(basename "$tool")
      case $name in
        bwrap | rg | sshd | ssh | mkfs.xfs | xfs_* | uv | uvx | node | npm | npx | stress-ng) continue ;;
      esac
      [ -e "$tools/$name" ] || ln -s "$tool" "$tools/$name"
    done
  done
  "$(command -v python3)" -m venv "$work/venv"
  # The machine's own network settings (its certificates and proxies) stay: a newcomer's machine has its own.
  mapfile -t network < <(env | grep -E '^[A-Za-z_]*(CERT|CA_BUNDLE|PROXY|proxy)[A-Za-z_]*=|^PIP_' || true)
  run() { env -i "${network[@]}" HOME="$home" PATH="$work/venv/bin:$tools" LANG=C.UTF-8 "$@"; }
  run python3 -m pip install -q uv >/dev/null 2>&1
  run python3 -m uv run eukhe run --max-lines 5 -- seq 1 100000 > "$work/first-command.log" 2>&1 ||
    { echo "the README's first command failed:"; cat "$work/first-command.log"; }
else
  run() { env -u PYTHONDONTWRITEBYTECODE -u GIT_AUTHOR_NAME -u GIT_AUTHOR_EMAIL -u GIT_COMMITTER_NAME -u GIT_COMMITTER_EMAIL HOME="$home" "$@"; }
  python3 -m uv sync --frozen -q
fi
busy=""
if [ "${HUNT_LOAD:-1}" = 0 ]; then
  :  # another process keeps the cores busy
elif command -v stress-ng >/dev/null; then
  stress-ng --cpu 2 --quiet & busy=$!
else
  (while :; do :; done) & busy="$!"
  (while :; do :; done) & busy="$busy $!"
fi
trap '[ -n "$busy" ] && kill $busy 2>/dev/null' EXIT
parts=${HUNT_PARTS:-full named}
green=0
best=0
for i in $(seq 1 "$runs"); do
  [[ $parts == *full* ]] || break
  run python3 -m uv run pytest -q -p no:cacheprovider > "$work/run-$i.log" 2>&1
  code=$?
  echo "run $i: exit $code: $(tail -n 1 "$work/run-$i.log")"
  if [ "$code" -ne 0 ]; then grep -E '^(FAILED|ERROR)' "$work/run-$i.log"; green=0; else green=$((green + 1)); fi
  [ "$green" -gt "$best" ] && best=$green
done
[[ $parts == *full* ]] && echo "longest streak: $best green full runs in a row under load ($work)"
[[ $parts == *named* ]] || exit 0
named=(
  "tests/real/test_ctrl_c.py::test_ctrl_c_on_a_waiting_bash_cancels_its_job_and_exits_130_after_the_end"
  "tests/real/test_ctrl_c.py::test_a_second_ctrl_c_leaves_at_once_and_names_the_job"
  "tests/real/test_ctrl_c.py::test_ctrl_c_on_a_waiting_ipython_interrupts_the_cell"
  "tests/ties/test_a_real_hand_back_equals_the_model.py::test_a_real_hand_back_equals_the_model"
  "tests/real/test_daemon_paths_and_random_requests.py::test_random_requests_never_answer_internal"
  "tests/real/test_prompt_children_daemon.py::test_a_prompt_child_whose_worker_keeps_dying_ends_interrupted_with_its_transcript"
)
for test in "${named[@]}"; do
  passed=0
  for _ in $(seq 1 "$repeats"); do
    if run python3 -m uv run pytest -q -p no:cacheprovider "$test" > "$work/named.log" 2>&1; then
      passed=$((passed + 1))
    else
      tail -n 30 "$work/named.log"
    fi
  done
  echo "$test: $passed of $repeats under load"
done
