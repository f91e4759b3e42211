#!/usr/bin/env bash
# Installs what the browser tests of the client-side library need, when it is missing:
# Debian's Chromium (/usr/bin/chromium) and playwright-core from npm (pinned by
# package-lock.json, installed into crates/rebill-server/js/node_modules, which git ignores).
# Any failure fails the run: the tests never skip for a missing browser.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

if [ ! -x /usr/bin/chromium ]; then
  command -v apt-get >/dev/null || { echo "setup: /usr/bin/chromium is missing and apt-get is not available" >&2; exit 1; }
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing chromium (apt-get)" >&2
  $sudo apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q chromium >&2
  [ -x /usr/bin/chromium ] || { echo "setup: apt-get installed chromium but /usr/bin/chromium is missing" >&2; exit 1; }
fi

command -v node >/dev/null || { echo "setup: node is not installed (Debian: apt-get install -y nodejs npm)" >&2; exit 1; }
command -v npm >/dev/null || { echo "setup: npm is not installed (Debian: apt-get install -y npm)" >&2; exit 1; }
# Reinstall when the lock file changed since the last install.
stamp="$here/node_modules/.rebill-lock-sha256"
want="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  echo "setup: npm ci (playwright-core)" >&2
  (cd "$here" && npm ci --no-audit --no-fund --ignore-scripts >&2)
  echo "$want" >"$stamp"
fi
node -e 'require(process.argv[1])' "$here/node_modules/playwright-core" || { echo "setup: playwright-core is not installed" >&2; exit 1; }
