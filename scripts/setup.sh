#!/usr/bin/env bash
# Prepares a machine for handoff: system packages, then a virtual environment in .venv.
# Sourced by ./run and ./test; idempotent, and quick when nothing is missing.
# Usage: scripts/setup.sh [--dev]   (--dev also installs the test requirements)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
want_dev=0
[ "${1:-}" = "--dev" ] && want_dev=1

say() { printf 'setup: %s\n' "$*" >&2; }

python_bin="${HANDOFF_PYTHON:-python3}"
if ! command -v "$python_bin" >/dev/null 2>&1; then
  say "python3 is missing. Run: sudo apt-get install -y python3 python3-venv python3-dev"
  exit 1
fi
if ! "$python_bin" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  say "handoff needs Python 3.11 or newer; $("$python_bin" --version) found. Install a newer python3 or set HANDOFF_PYTHON."
  exit 1
fi

# System packages: PortAudio headers (pyaudio builds from source on Linux), a C compiler and
# Python headers for that build, espeak-ng, flite and sox for test speech.
missing=()
[ -f /usr/include/portaudio.h ] || missing+=(portaudio19-dev)
command -v espeak-ng >/dev/null 2>&1 || missing+=(espeak-ng)
# flite: the offline demo's user says "hey jarvis" in a voice the wake model hears (espeak-ng's it
# mostly does not); with --dev, festival's HTS voice is the wake corpus's third voice family.
command -v flite >/dev/null 2>&1 || missing+=(flite)
if [ "$want_dev" = 1 ]; then
  command -v text2wave >/dev/null 2>&1 || missing+=(festival)
  [ -d /usr/share/festival/voices/us/cmu_us_slt_arctic_hts ] || missing+=(festvox-us-slt-hts)
fi
command -v sox >/dev/null 2>&1 || missing+=(sox)
# The echo canceller in front of the stop and barge-in detectors (audio_io/echo_cancel.py): Xiph's speexdsp.
compgen -G '/usr/lib/*/libspeexdsp.so.1' >/dev/null || compgen -G '/usr/lib/libspeexdsp.so.1' >/dev/null || missing+=(libspeexdsp1)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
if ! "$python_bin" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  missing+=(python3-dev)
fi
if ! "$python_bin" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
# The tests drive the web page in a real browser: Debian's headless chromium and its driver.
if [ "$want_dev" = 1 ]; then
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
fi

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    say "installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Another apt-get (unattended-upgrades, a second terminal) may hold the lock: wait for it.
    apt_wait=(-o DPkg::Lock::Timeout=120)
    if ! apt-get "${apt_wait[@]}" update -qq >/dev/null ||
      ! apt-get "${apt_wait[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
      say "apt-get could not install ${missing[*]} (see its message above). If another package manager was"
      say "still running, wait until it has finished and run this again; or install them yourself:"
      say "apt-get install -y ${missing[*]}"
      exit 1
    fi
  else
    say "missing system packages: ${missing[*]}"
    say "Run: sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
fi

# The venv is rebuilt only when the requirements change: a stamp per set (--dev or not) holds the
# checksum of its files. Both stamps stay, so ./test and ./run in turn install nothing; a dev
# install is a superset and also stamps the plain set.
base_reqs=("$root/requirements.txt" "$root/constraints.txt" "$root/pyproject.toml")
reqs=("${base_reqs[@]}")
[ "$want_dev" = 1 ] && reqs+=("$root/requirements-dev.txt")
checksum() { cat "$@" | sha256sum | cut -d' ' -f1; }
stamp_value="$(checksum "${reqs[@]}")"
stamp_file="$venv/.handoff-stamp-$want_dev"
if [ ! -x "$venv/bin/python" ]; then
  say "creating virtual environment in .venv"
  "$python_bin" -m venv "$venv"
fi
# The satellite's venv, the editable install of handoff and the byte-compiling of the packages do
# not depend on one another's files: they run beside the requirements' install, which uses one core
# (a fresh clone's set-up took 98 and 108 s instead of 117 and 126 on two busy cores, session 19).
# Any that fails stops the set-up, and nothing is stamped as installed.
jobs=()
started() { jobs+=("$!:$1"); }

# The tests run a real wyoming-satellite (the reference satellite) against the hub. It pins an
# older wyoming than handoff's, so it lives in its own virtual environment.
if [ "$want_dev" = 1 ]; then
  sat_venv="$root/.venv-satellite"
  sat_pins=(wyoming-satellite==1.0.0 wyoming==1.4.1 zeroconf==0.88.0 ifaddr==0.2.0 pyring-buffer==1.0.0)
  if ! "$sat_venv/bin/python" -c 'import wyoming_satellite' >/dev/null 2>&1; then
    say "creating .venv-satellite (wyoming-satellite, for the rooms tests)"
    { "$python_bin" -m venv "$sat_venv" &&
      "$sat_venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${sat_pins[@]}"; } &
    started "creating .venv-satellite"
  fi
fi

if [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp_value" ]; then
  say "installing Python packages (first run takes about a minute)"
  # uv installs the same pinned packages with two thirds of pip's CPU in about half its time (a
  # fresh .venv: HANDOFF.md, "Dependencies"). It comes from the package index like the rest; where
  # it cannot be had or fails (an index only pip is configured for), pip does the work.
  pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
  installer=("${pip[@]}")
  if "${pip[@]}" -c "$root/constraints.txt" uv >/dev/null 2>&1; then
    installer=("$venv/bin/python" -m uv pip install -q --python "$venv/bin/python")
  fi
  "${installer[@]}" --no-deps -e "$root" &
  started "installing handoff itself (pip install -e .)"
  # Compiled below on every core, where pip would compile them on one.
  req_args=(--no-compile -c "$root/constraints.txt" -r "$root/requirements.txt")
  [ "$want_dev" = 1 ] && req_args+=(-r "$root/requirements-dev.txt")
  if ! "${installer[@]}" "${req_args[@]}" &&
    { [ "${installer[*]}" = "${pip[*]}" ] || ! "${pip[@]}" "${req_args[@]}"; }; then
    wait
    say "the requirements could not be installed (see the message above)"
    exit 1
  fi
  # Not checked: a package may ship files for another Python that do not compile; they never load.
  # Left out, as nothing handoff or its tests run imports them (44 % of the code, about 12 s of
  # CPU; session 21): the installers, mypy (the checker runs compiled; its sources are compiled on
  # first use), packages' own tests and onnxruntime's tooling.
  "$venv/bin/python" -m compileall -q -j 0 \
    -x '/site-packages/(pip|setuptools|mypy|mypyc)/|/site-packages/(.+/)?(tests?|testing)/|/onnxruntime/(tools|transformers|quantization)/' \
    "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
  pending_stamp=1
fi

for job in ${jobs[@]+"${jobs[@]}"}; do
  if ! wait "${job%%:*}"; then
    say "${job#*:} failed (see the message above)"
    exit 1
  fi
done
if [ "${pending_stamp:-0}" = 1 ]; then
  echo "$stamp_value" > "$stamp_file"
  if [ "$want_dev" = 1 ]; then
    checksum "${base_reqs[@]}" > "$venv/.handoff-stamp-0"
  fi
fi
