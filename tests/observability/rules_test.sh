#!/bin/sh
# promtool on deploy/prometheus: the rules load, the example configuration is
# valid, and the alert rules' unit tests (crest-rules.test.yml) pass.
# Exit 77 (skipped) only when promtool is not installed.
set -eu
dir="$1/deploy/prometheus"
if ! command -v promtool >/dev/null 2>&1; then
  echo "SKIP: promtool not installed (apt-get install prometheus; scripts/debian-packages.txt)"
  exit 77
fi
promtool check rules "$dir/crest-rules.yml"
promtool check config "$dir/prometheus.yml"
cd "$dir" && promtool test rules crest-rules.test.yml
