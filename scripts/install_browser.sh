#!/usr/bin/env bash
# Headless browser for the dashboard browser test (tests/omnieval/dashboard/test_dashboard_browser.py):
# Debian chromium + its matching chromedriver from apt, and the selenium driver package into a venv.
# Idempotent: apt runs only when /usr/bin/chromium or /usr/bin/chromedriver is missing; pip skips a present selenium.
# Usage: scripts/install_browser.sh [VENV_DIR]   (default: .venv)
set -euo pipefail

venv="${1:-.venv}"

if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
  sudo=""
  [[ "$(id -u)" -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver
fi

if ! "$venv/bin/python" -c "import selenium" 2>/dev/null; then
  "$venv/bin/python" -m pip install -q "selenium>=4.20"
fi

/usr/bin/chromium --version 2>/dev/null | grep -i chromium
/usr/bin/chromedriver --version
"$venv/bin/python" -c "import selenium; print('selenium', selenium.__version__)"
