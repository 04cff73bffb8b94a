#!/usr/bin/env bash
# The real-host test of the VS Code extension: setup (cached), the .vsix, then run.mjs.
#   KERNELOPT_HOST_TEST_OUT   where screenshots and logs go (default: client-vscode/host-test/out)
#   KERNELOPT_HOST_TEST_SLOW  multiplies every wait (default 1; a loaded machine may need 2)
#   KERNELOPT_PYTHON          the Python that runs kernelopt-lsp (default: the repository's .venv)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
started=$SECONDS

setup_out=$(bash "$HERE/setup.sh") || { echo "vscode-host: FAILED: the setup did not complete (see above)" >&2; exit 1; }
eval "$(grep -E '^[A-Z0-9_]+=' <<<"$setup_out" | sed 's/^/export /')"
echo "vscode-host: setup ready after $((SECONDS - started)) s"

export KERNELOPT_REPO=$REPO
export KERNELOPT_PYTHON=${KERNELOPT_PYTHON:-$REPO/.venv/bin/python}
[ -x "$KERNELOPT_PYTHON" ] || { echo "vscode-host: FAILED: no Python at $KERNELOPT_PYTHON (run make venv first)" >&2; exit 1; }
"$KERNELOPT_PYTHON" -c "import kernelopt_lsp.main" || { echo "vscode-host: FAILED: $KERNELOPT_PYTHON cannot import kernelopt_lsp" >&2; exit 1; }
# The server and its workers run this checkout's code.
export PYTHONPATH=$REPO:$REPO/server${PYTHONPATH:+:$PYTHONPATH}
export KERNELOPT_HOST_TEST_OUT=${KERNELOPT_HOST_TEST_OUT:-$HERE/out}

# The extension as a user installs it: its .vsix, built from this checkout.
version=$(node -p "require('$REPO/client-vscode/package.json').version")
export KERNELOPT_VSIX=$REPO/client-vscode/kernelopt-$version.vsix
(
  cd "$REPO/client-vscode"
  [ -d node_modules ] || npm ci --no-audit --no-fund >/dev/null
  npm run --silent build >/dev/null && npm run --silent package >/dev/null
) || { echo "vscode-host: FAILED: could not build the .vsix (npm ci / npm run build / npm run package)" >&2; exit 1; }
[ -f "$KERNELOPT_VSIX" ] || { echo "vscode-host: FAILED: no $KERNELOPT_VSIX after npm run package" >&2; exit 1; }

"$NODE24" "$HERE/run.mjs"
