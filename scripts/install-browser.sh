#!/usr/bin/env bash
# Install the headless browser squall renders JavaScript pages with (render.*; docs/frontier.md "JavaScript pages").
#
#   scripts/install-browser.sh        # called by scripts/test.sh before the tests
#
# squall never downloads a browser build: it uses the system's Chromium
# (Debian/Ubuntu package `chromium`) through Playwright's executable_path.
# If a Chromium is already found (render.browser.path aside: chromium,
# chromium-browser, google-chrome on PATH, or /usr/bin/chromium), nothing is
# done. Otherwise, as root with apt-get (CI: `.ci/run` on a fresh clone), it
# runs `apt-get update && apt-get install -y chromium`; as another user it
# prints the command to run and exits 0: the render tests then fail with one
# line naming what is missing (they never pass without a browser).
set -euo pipefail

for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$name" >/dev/null 2>&1; then
        echo "install-browser: found $(command -v "$name")"
        exit 0
    fi
done
if [ -x /usr/bin/chromium ]; then
    echo "install-browser: found /usr/bin/chromium"
    exit 0
fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-browser: installing chromium with apt-get (render tests need it)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends chromium
    command -v chromium >/dev/null 2>&1 || { echo "install-browser: apt-get did not install chromium" >&2; exit 1; }
    echo "install-browser: installed $(command -v chromium)"
else
    echo "install-browser: no chromium found; install it (as root: apt-get install chromium)" \
         "or the render tests will fail" >&2
fi
