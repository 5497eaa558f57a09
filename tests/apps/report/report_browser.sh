#!/usr/bin/env bash
# `gpusim report` opened in a real browser: Debian's Chromium (tools/install-deps.sh installs it),
# headless. The page must load as written (no script, nothing fetched), lay out its figures, and
# hold one roofline circle and one timeline bar per kernel of the prediction it draws.
#   tests/apps/report/report_browser.sh SOURCE_DIR GPUSIM_BINARY
set -euo pipefail
src=$(cd "$1" && pwd)
gpusim=$2
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
  echo "report_browser: no chromium on PATH; tools/install-deps.sh installs Debian's (apt-get install chromium)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$gpusim" report "$src/models/mobilenet_v2.onnx" --gpu nvidia-rtx-3060 --host windows --runtime pytorch-eager \
  --runtimes pytorch-eager,torch-compile,tensorrt --gpus nvidia-rtx-3060,nvidia-rtx-4090 -o "$work/report.html"
kernels=$("$gpusim" predict "$src/models/mobilenet_v2.onnx" --gpu nvidia-rtx-3060 --host windows --runtime pytorch-eager \
  --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["kernels"]))')
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-extensions --user-data-dir="$work/profile")
# The DOM as the browser built it: it parsed the page and kept every figure.
timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$work/report.html" > "$work/dom.html" 2> "$work/browser.log" || {
  cat "$work/browser.log" >&2
  echo "report_browser: $browser could not load the report" >&2
  exit 1
}
python3 - "$work/dom.html" "$kernels" <<'PY'
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
kernels = int(sys.argv[2])
fail = []
for sid in ("roofline", "timeline", "runtimes", "gpus"):
    if f'id="{sid}"' not in dom:
        fail.append(f"no <svg id={sid}>")
roof = re.search(r'<svg id="roofline".*?</svg>', dom, re.S)
circles = len(re.findall(r'<circle class="kernel"', roof.group(0))) if roof else 0
if circles != kernels:
    fail.append(f"the roofline has {circles} kernels, the prediction {kernels}")
tl = re.search(r'<svg id="timeline".*?</svg>', dom, re.S)
bars = len(re.findall(r'<rect class="kernel"', tl.group(0))) if tl else 0
if bars != kernels:
    fail.append(f"the timeline has {bars} kernels, the prediction {kernels}")
launches = len(re.findall(r'<rect class="launch"', tl.group(0))) if tl else 0
if not 0 < launches <= kernels:
    fail.append(f"the host track has {launches} launches for {kernels} kernels")
if "<script" in dom or re.search(r'(src|href)="https?:', dom):
    fail.append("the page has a script or fetches something")
if 'id="top-costs"' not in dom:
    fail.append("no table of the biggest costs")
if fail:
    sys.exit("report_browser: " + "; ".join(fail))
print(f"report_browser: the DOM holds the roofline and timeline of {kernels} kernels, the host track, both comparisons")
PY
# And it paints: a screenshot of the page, not blank.
timeout 120 "$browser" "${flags[@]}" --hide-scrollbars --window-size=1100,2400 --screenshot="$work/shot.png" \
  "file://$work/report.html" 2>> "$work/browser.log" || { cat "$work/browser.log" >&2; exit 1; }
python3 - "$work/shot.png" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", data[16:24])
# The image's bytes: a blank page compresses to almost nothing; figures do not.
idat = b"".join(data[i + 8:i + 8 + struct.unpack(">I", data[i:i + 4])[0]]
                for i in range(8, len(data)) if data[i + 4:i + 8] == b"IDAT")
raw = zlib.decompress(idat)
distinct = len(set(raw[k:k + 3] for k in range(0, min(len(raw), 3_000_000), 997)))
if w < 1000 or h < 2000 or distinct < 8:
    sys.exit(f"report_browser: the screenshot is {w}x{h} with {distinct} distinct samples: nothing painted")
print(f"report_browser: painted {w}x{h}, {len(data)} bytes")
PY
