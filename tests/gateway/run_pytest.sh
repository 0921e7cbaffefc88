#!/usr/bin/env bash
# The Cosmos DB SDK suite (ctest label `gateway`): makes a venv under the build directory with the pinned official
# azure-cosmos SDK and pytest (requirements.txt, from PyPI; reused while requirements.txt is unchanged), then runs
# pytest against real mayflyd processes that the tests start (conftest.py).
#
#   run_pytest.sh MAYFLYD VENV_DIR [pytest args...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mayflyd="$1"
venv="$2"
shift 2
python=/usr/bin/python3
[ -x "$python" ] || python=python3
stamp="$venv/.requirements"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$stamp"; then
  rm -rf "$venv"
  "$python" -m venv "$venv" || { echo "run_pytest: cannot make a venv (apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$stamp"
fi
export MAYFLY_MAYFLYD="$mayflyd"
set +e
# A test that hangs (an SDK retrying forever) fails after 180 s instead of holding the suite (times
# $MAYFLY_TEST_TIME_SCALE, which make sanitize sets: conftest.py scales every wait by it).
"$venv/bin/python" -m pytest -p no:cacheprovider --timeout $((180 * ${MAYFLY_TEST_TIME_SCALE:-1})) -v "$here" "$@"
code=$?
set -e
if [ "$code" = 5 ]; then
  echo "run_pytest: pytest collected no tests (exit code 5): that is a failure, not a pass" >&2
  exit 1
fi
exit "$code"
