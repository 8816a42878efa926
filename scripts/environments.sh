#!/usr/bin/env bash
# Registers sandboxd's runtime environments in the helper's config, as root
# (install.sh runs it right after writing the config; see docs/ENVIRONMENTS.md).
#   minimal             python, no tree: the host's /usr as the sandbox sees it.
#   python-datascience  python, the default unless SANDBOXD_ENVIRONMENTS=minimal:
#                       Debian's data-science packages (through /usr) plus a
#                       read-only tree with a matplotlibrc (Noto Sans CJK first),
#                       a prebuilt matplotlib font list and a sitecustomize that
#                       seeds it into the exec's private /tmp.
# Usage: environments.sh SANDBOXCTL HELPER_CONFIG PREFIX
set -euo pipefail
cd "$(dirname "$0")/.."
ctl=$1 config=$2 prefix=$3
choice=${SANDBOXD_ENVIRONMENTS:-datascience}
case $choice in datascience|minimal) ;; *) echo "environments: SANDBOXD_ENVIRONMENTS must be datascience or minimal, not '$choice'" >&2; exit 1 ;; esac

"$ctl" admin env-register --helper-config "$config" --name minimal --language python \
  $([ "$choice" = minimal ] && echo --default)
[ "$choice" = minimal ] && exit 0

# The packages python-datascience declares (scripts/deps.sh installs them).
# pypdf: Debian 12 has python3-pypdf (3.4.1) and the older python3-pypdf2;
# we use python3-pypdf.
pkgs="python3-numpy python3-pandas python3-scipy python3-sklearn python3-matplotlib python3-seaborn python3-plotly python3-openpyxl python3-xlsxwriter python3-docx python3-reportlab python3-pypdf weasyprint python3-pil fonts-noto-cjk"
declared=()
for p in $pkgs; do
  v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null) && [ -n "$v" ] || {
    echo "environments: $p is not installed; python-datascience is not registered. Fix: scripts/deps.sh (or SANDBOXD_ENVIRONMENTS=minimal)" >&2; exit 0; }
  declared+=(--package "$p=$v")
done

lib=$prefix/lib/sandboxd/env
tree=$lib/python-datascience
install -d -m 0755 -o root -g root "$prefix/lib/sandboxd" "$lib"
rm -rf "$tree.new"
install -d -m 0755 -o root -g root "$tree.new" "$tree.new/python" "$tree.new/matplotlib"
install -m 0644 -o root -g root deploy/environments/python-datascience/python/sitecustomize.py "$tree.new/python/"
install -m 0644 -o root -g root deploy/environments/python-datascience/matplotlib/matplotlibrc "$tree.new/matplotlib/"
# The font list, built now with the environment's own matplotlibrc.
scratch=$(mktemp -d)
MPLCONFIGDIR=$scratch MATPLOTLIBRC=$tree.new/matplotlib/matplotlibrc HOME=$scratch \
  /usr/bin/python3 -c 'import matplotlib.font_manager as f; f.findfont("Noto Sans CJK JP", fallback_to_default=False)'
install -m 0644 -o root -g root "$scratch"/fontlist-v*.json "$tree.new/matplotlib/"
rm -rf "$scratch"
rm -rf "$tree" "$tree.manifest.json"
mv "$tree.new" "$tree"

"$ctl" admin env-register --helper-config "$config" --name python-datascience --language python \
  --root "$tree" --default "${declared[@]}" \
  --env 'PYTHONPATH=$MOUNT/python' \
  --env 'MATPLOTLIBRC=$MOUNT/matplotlib/matplotlibrc' \
  --env 'MPLCONFIGDIR=/tmp/matplotlib'
