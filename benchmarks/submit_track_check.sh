#!/usr/bin/env bash
# scripts/submit.py end to end on a GPU machine, for the gated_delta_net track.
# Builds a throw-away fork of this kit holding both GDN kernels (switch_track.py --add),
# commits it with a local git identity, then:
#   1. submit.py --dry-run: packs, audits and runs each definition in the organizers'
#      settings (recorded in the fork's runs/ledger.jsonl); no tag;
#   2. submit.py: accepts those ledger runs (same solution hashes) and creates the tags;
#   3. shows each tag's config.toml and solution/ listing.
#   bash benchmarks/submit_track_check.sh [FORK_DIR]      (default: /tmp/fib-track-fork)
# SUBMIT_ARGS is added to both submit.py calls (e.g. "--definition gdn_decode_qk4_v8_d128_k_last"
# to split the work over two calls); REUSE=1 keeps an existing fork and its ledger; DRY_ONLY=1
# stops after the dry run.
set -eu
KIT=$(cd "$(dirname "$0")/.." && pwd)
FORK=$(realpath -m "${1:-/tmp/fib-track-fork}")
if [ "${REUSE:-0}" != 1 ] || [ ! -d "$FORK/.git" ]; then
    rm -rf "$FORK"
    mkdir -p "$FORK"
    for part in fib_core scripts starters solution config.toml .gitignore; do
        cp -r "$KIT/$part" "$FORK/"
    done
    find "$FORK" -name __pycache__ -prune -exec rm -rf {} +
    cd "$FORK"
    PYTHONPATH="$FORK${PYTHONPATH:+:$PYTHONPATH}" python3 scripts/switch_track.py gdn_prefill_qk4_v8_d128_k_last --add
    git init -q
    git config user.name "Kit Check"
    git config user.email "kit-check@example.com"
    git add -A
    git commit -qm "track fork: GDN decode and prefill"
fi
cd "$FORK"
export PYTHONPATH="$FORK${PYTHONPATH:+:$PYTHONPATH}"  # keep what the caller added (wheels)
t0=$SECONDS
# shellcheck disable=SC2086
python3 scripts/submit.py --dry-run ${SUBMIT_ARGS:-}
echo "dry run: $((SECONDS - t0)) s"
[ "${DRY_ONLY:-0}" = 1 ] && exit 0
t0=$SECONDS
# shellcheck disable=SC2086
python3 scripts/submit.py ${SUBMIT_ARGS:-}
echo "tag run: $((SECONDS - t0)) s"
for tag in $(git tag --list 'submission-*'); do
    echo "== $tag"
    git show "$tag:config.toml" | grep -E '^(definition|language|entry_point) ='
    git ls-tree -r --name-only "$tag" solution
done
git status --short | head -5
