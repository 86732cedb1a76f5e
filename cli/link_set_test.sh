#!/usr/bin/env bash
# The `crest` binary is a client: it must not carry SQLite, prometheus-cpp or
# the controller's campaign engine. Checks the built binary itself (its shared
# library needs and its defined symbols), beside the configure-time check of
# the link graph in cmake/CrestLinkCheck.cmake.
set -euo pipefail
bin=${1:?usage: link_set_test.sh path/to/crest}
fail=0
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for lib in libsqlite3 libprometheus-cpp; do
  if grep -q "^$lib" <<<"$needed"; then
    echo "FAIL: $bin needs $(grep "^$lib" <<<"$needed" | head -1)"; fail=1
  fi
done
symbols=$(nm -C --defined-only "$bin")
for sym in 'crest::controller::CampaignManager::' 'crest::controller::Store::' \
           'crest::controller::AgentRegistry::' 'sqlite3_open' 'prometheus::Registry::'; do
  if grep -qF "$sym" <<<"$symbols"; then
    echo "FAIL: $bin defines $sym"; fail=1
  fi
done
# The check must see something: the CLI does render reports and parse specs.
if ! grep -qF 'crest::controller::ParseCampaignSpec' <<<"$symbols"; then
  echo "FAIL: $bin has no crest::controller::ParseCampaignSpec; is this the crest binary?"; fail=1
fi
if [ $fail -eq 0 ]; then echo "crest links no server part ($(wc -l <<<"$needed") shared libraries)"; fi
exit $fail
