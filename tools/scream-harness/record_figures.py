#!/usr/bin/env python3
"""Read SCReAM's throughput off the test record's 25 ms figures (EricssonResearch/scream
e0af5ef, images/L4S-100Mbps-25ms-*.png) and print its mean per 20-s phase, to compare the
record's tables (which state no averaging window) with how aqmlab's `scream` suite averages.

    python3 tools/scream-harness/record_figures.py <scream git dir>

Needs Pillow (in the project's .venv via matplotlib). The figures are MATLAB plots, 1120 x 1508
px: the top panel ("Throughput [Mbps]", 0-100 Mbit/s) is found from its axis lines; in each
pixel column the median of the plotted lines' coloured pixels (blue "Transmitted", orange
"RTP", yellow "ACKed", which coincide) is the value; the legend box is skipped. One column is
0.115 s (100-s figures), so phase means are good to about +/-1 Mbit/s.
"""
import subprocess
import sys
from io import BytesIO

from PIL import Image

COMMIT = "e0af5ef"
FIGURES = [
    # (file, length of the run in s, what it shows)
    ("L4S-100Mbps-25ms-0-4-TCP.png", 100, "Test 2 (-rand 0), 25 ms: 0 TCP, then one Prague flow more every 20 s"),
    ("L4S-100Mbps-25ms-r-50-0-4-TCP.png", 100, "Test 3 (-rand 50), 25 ms: the same"),
]


def dark(p):
    return sum(p) < 300


def line_colour(p):
    r, g, b = p
    return (r > 180 and g > 120 and b < 100) or (r > 180 and g < 120 and b < 80) or (r < 60 and g > 80 and b > 150)


def digitise(img):
    px = img.load()
    w, h = img.size
    # Horizontal axis lines of the top panel: the first two rows that are dark over most of
    # the plot width.
    rows = [y for y in range(h // 3) if sum(dark(px[x, y]) for x in range(w)) > 0.5 * w]
    y100 = rows[0]
    y0 = next(y for y in rows if y > y100 + 50)
    x0 = next(x for x in range(w) if sum(dark(px[x, y]) for y in range(y100, y0)) > 0.8 * (y0 - y100))
    x1 = max(x for x in range(w) if dark(px[x, y0]))
    # The legend: the lowest long dark row in the right half, from its left edge.
    legend = None
    for y in range(y100 + 3, y0 - 3):
        run = [x for x in range((x0 + x1) // 2, x1) if dark(px[x, y])]
        if len(run) > 100:
            legend = (min(run), y)
    out = []
    for x in range(x0 + 2, x1 - 1):
        ys = [y for y in range(y100 - 12, y0 - 1)
              if not (legend and x >= legend[0] - 1 and y <= legend[1] + 1) and line_colour(px[x, y])]
        if ys:
            ym = sorted(ys)[len(ys) // 2]
            out.append(((x - x0) / (x1 - x0), (y0 - ym) / (y0 - y100) * 100.0))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for name, length, what in FIGURES:
        png = subprocess.run(["git", "--git-dir", sys.argv[1], "show", f"{COMMIT}:images/{name}"],
                             check=True, capture_output=True).stdout
        d = digitise(Image.open(BytesIO(png)).convert("RGB"))

        def mean(a, b):
            v = [r for f, r in d if a <= f * length < b]
            return sum(v) / len(v)

        print(f"{name}: {what}")
        print("  n  mean[+5,+20] s  mean[+15,+20] s  last 2 s")
        for n in range(length // 20):
            s = 20 * n
            print(f"  {n}  {mean(s + 5, s + 20):14.1f}  {mean(s + 15, s + 20):15.1f}  {mean(s + 18, s + 20):8.1f}")


if __name__ == "__main__":
    main()
