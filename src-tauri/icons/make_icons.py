#!/usr/bin/env python3
"""Draws the app icons: a rounded Feishu-blue (#3370FF) square with a white speech bubble holding
a blue check mark ("the assistant asks, you approve").

Only the Python standard library: each shape is a signed distance field, and a pixel's coverage
is its distance in pixels clamped to [0, 1], which anti-aliases edges without supersampling. Each
size is drawn at its own resolution rather than scaled down, so the 32 px icon stays crisp.

Run from anywhere: python3 src-tauri/icons/make_icons.py (writes next to this file).
"""

import math
import os
import struct
import zlib

BLUE = (0x33, 0x70, 0xFF)
WHITE = (0xFF, 0xFF, 0xFF)

# name -> size in pixels, as tauri.conf.json's bundle.icon lists them.
SIZES = {"32x32.png": 32, "128x128.png": 128, "128x128@2x.png": 256, "icon.png": 512}


def rounded_box(px, py, cx, cy, hx, hy, r):
    qx = abs(px - cx) - (hx - r)
    qy = abs(py - cy) - (hy - r)
    outside = math.hypot(max(qx, 0.0), max(qy, 0.0))
    inside = min(max(qx, qy), 0.0)
    return outside + inside - r


def segment(px, py, ax, ay, bx, by):
    pax, pay = px - ax, py - ay
    bax, bay = bx - ax, by - ay
    h = max(0.0, min(1.0, (pax * bax + pay * bay) / (bax * bax + bay * bay)))
    return math.hypot(pax - bax * h, pay - bay * h)


def triangle(px, py, a, b, c):
    """Signed distance to a triangle (negative inside), after Inigo Quilez."""
    d = min(segment(px, py, *a, *b), segment(px, py, *b, *c), segment(px, py, *c, *a))
    def side(p0, p1):
        return (p1[0] - p0[0]) * (py - p0[1]) - (p1[1] - p0[1]) * (px - p0[0])
    s1, s2, s3 = side(a, b), side(b, c), side(c, a)
    inside = (s1 >= 0 and s2 >= 0 and s3 >= 0) or (s1 <= 0 and s2 <= 0 and s3 <= 0)
    return -d if inside else d


def coverage(distance, pixel):
    return max(0.0, min(1.0, 0.5 - distance / pixel))


def over(dst, color, alpha):
    """Composites `color` at `alpha` over the premultiplied-free RGBA pixel `dst`."""
    r, g, b, a = dst
    out_a = alpha + a * (1 - alpha)
    if out_a == 0:
        return (0.0, 0.0, 0.0, 0.0)
    mix = lambda s, d: (s * alpha + d * a * (1 - alpha)) / out_a
    return (mix(color[0], r), mix(color[1], g), mix(color[2], b), out_a)


def pixel_at(x, y, pixel):
    rgba = (0.0, 0.0, 0.0, 0.0)
    # The tile, with a small margin as desktop icon themes expect.
    rgba = over(rgba, BLUE, coverage(rounded_box(x, y, 0.5, 0.5, 0.47, 0.47, 0.2), pixel))
    # The bubble: a rounded rectangle and its tail at the lower left.
    bubble = min(
        rounded_box(x, y, 0.5, 0.45, 0.28, 0.21, 0.09),
        triangle(x, y, (0.31, 0.58), (0.28, 0.77), (0.47, 0.63)),
    )
    rgba = over(rgba, WHITE, coverage(bubble, pixel))
    # The check mark, a stroke of two segments with round caps.
    check = min(
        segment(x, y, 0.385, 0.455, 0.465, 0.535),
        segment(x, y, 0.465, 0.535, 0.625, 0.375),
    ) - 0.038
    rgba = over(rgba, BLUE, coverage(check, pixel))
    return rgba


def render(size):
    pixel = 1.0 / size
    rows = []
    for j in range(size):
        row = bytearray([0])  # filter type: none
        y = (j + 0.5) * pixel
        for i in range(size):
            r, g, b, a = pixel_at((i + 0.5) * pixel, y, pixel)
            row += bytes((round(r), round(g), round(b), round(a * 255)))
        rows.append(bytes(row))
    return b"".join(rows)


def png(size, raw):
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    for name, size in SIZES.items():
        with open(os.path.join(here, name), "wb") as f:
            f.write(png(size, render(size)))
        print(name, size)


if __name__ == "__main__":
    main()
