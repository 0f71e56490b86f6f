"""PNG plots of internal-tensor memory over the schedule (TeMCO Fig. 4), with no plotting library.

matplotlib is not a vtmlir dependency (and not installed on the reference machine), so the plot is
rasterised here with numpy and written with zlib: axes, a step line per timeline, a dashed line at
each peak, tick labels and a legend in a built-in 5×7 bitmap font. Several timelines (e.g. original
and decomposed) share the axes; x is the step index, y is MiB (KiB for small graphs).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

# 5x7 glyphs, rows top to bottom, '#' = ink. Lower-case letters print as upper case.
_FONT = {
    "0": ".###.#...##..###.#.###..##...#.###.", "1": "..#...##....#....#....#....#...###.",
    "2": ".###.#...#....#..##..#...#....#####", "3": "####.....#...#..###.....##...#.###.",
    "4": "...#...##..#.#.#..#.#####...#....#.", "5": "######....####.....#....##...#.###.",
    "6": "..##..#...#....####.#...##...#.###.", "7": "#####....#...#...#...#....#....#...",
    "8": ".###.#...##...#.###.#...##...#.###.", "9": ".###.#...##...#.####....#...#..##..",
    "A": ".###.#...##...#######...##...##...#", "B": "####.#...##...#####.#...##...#####.",
    "C": ".###.#...##....#....#....#...#.###.", "D": "###..#..#.#...##...##...##..#.###..",
    "E": "######....#....####.#....#....#####", "F": "######....#....####.#....#....#....",
    "G": ".###.#...##....#.####...##...#.####", "H": "#...##...##...#######...##...##...#",
    "I": ".###...#....#....#....#....#...###.", "J": "..###...#....#....#....#.#..#..##..",
    "K": "#...##..#.#.#..##...#.#..#..#.#...#", "L": "#....#....#....#....#....#....#####",
    "M": "#...###.###.#.##.#.##...##...##...#", "N": "#...##...###..##.#.##..###...##...#",
    "O": ".###.#...##...##...##...##...#.###.", "P": "####.#...##...#####.#....#....#....",
    "Q": ".###.#...##...##...##.#.##..#..##.#", "R": "####.#...##...#####.#.#..#..#.#...#",
    "S": ".#####....#.....###.....#....#####.", "T": "#####..#....#....#....#....#....#..",
    "U": "#...##...##...##...##...##...#.###.", "V": "#...##...##...##...##...#.#.#...#..",
    "W": "#...##...##...##.#.##.#.##.#.#.#.#.", "X": "#...##...#.#.#...#...#.#.#...##...#",
    "Y": "#...##...#.#.#...#....#....#....#..", "Z": "#####....#...#...#...#...#....#####",
    " ": "." * 35, ".": "." * 25 + "..##...##.", "-": "." * 15 + "#####" + "." * 15,
    "_": "." * 30 + "#####", ":": ".....##...##........##...##........", "/": "....#....#...#...#...#...#....#....",
    "(": "...#...#...#....#....#.....#.....#.", ")": ".#.....#.....#....#....#...#...#...",
    "%": "##...##..#...#...#...#...#..##...##", ",": "." * 25 + "..##...#..", "=": "..........#####.....#####..........",
    "@": ".###.#...##.###.#.##.###.#.....###.", "+": ".......#....#..#####..#....#.......",
    "<": "...#...#...#...#.....#.....#.....#.", ">": ".#.....#.....#.....#...#...#...#...",
    "*": ".......#..#.#.#.###.#.#.#..#.......", "'": "..#....#...#.......................",
}
_PALETTE = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (255, 127, 14), (23, 190, 207)]


def _glyph(ch: str) -> np.ndarray:
    rows = _FONT.get(ch.upper(), _FONT["*"])[:35].ljust(35, ".")
    return np.array([c == "#" for c in rows], dtype=bool).reshape(7, 5)


class Canvas:
    """An RGB raster with the few drawing primitives a line plot needs."""

    def __init__(self, width: int, height: int):
        self.pixels = np.full((height, width, 3), 255, dtype=np.uint8)

    @property
    def width(self) -> int:
        return self.pixels.shape[1]

    @property
    def height(self) -> int:
        return self.pixels.shape[0]

    def rect(self, x0: int, y0: int, x1: int, y1: int, color) -> None:
        x0, x1 = sorted((int(x0), int(x1)))
        y0, y1 = sorted((int(y0), int(y1)))
        self.pixels[max(y0, 0) : min(y1 + 1, self.height), max(x0, 0) : min(x1 + 1, self.width)] = color

    def hline(self, x0, x1, y, color, dash: int = 0) -> None:
        if not dash:
            self.rect(x0, y, x1, y, color)
            return
        for x in range(int(min(x0, x1)), int(max(x0, x1)) + 1, 2 * dash):
            self.rect(x, y, min(x + dash - 1, max(x0, x1)), y, color)

    def vline(self, x, y0, y1, color) -> None:
        self.rect(x, y0, x, y1, color)

    def text(self, x: int, y: int, text: str, color=(0, 0, 0), anchor: str = "left") -> None:
        width = 6 * len(text) - 1
        if anchor == "right":
            x -= width
        elif anchor == "center":
            x -= width // 2
        for i, ch in enumerate(text):
            mask = _glyph(ch)
            gx = x + 6 * i
            for r, c in zip(*np.nonzero(mask)):
                if 0 <= gx + c < self.width and 0 <= y + r < self.height:
                    self.pixels[y + r, gx + c] = color

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + row.tobytes() for row in self.pixels)

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks if span > 0 else 1.0
    magnitude = 10 ** np.floor(np.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * magnitude >= raw:
            return float(m * magnitude)
    return float(10 * magnitude)


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value >= 100 or value == int(value) else f"{value:.3g}"


def render_memory(series, title: str = "internal tensor memory", width: int = 800, height: int = 420) -> Canvas:
    """Draw `series`, a list of `(label, usage)` with `usage` the bytes live at each step."""
    series = [(label, [int(v) for v in usage]) for label, usage in series]
    top = max((max(u, default=0) for _, u in series), default=0)
    unit, scale = ("MIB", 2**20) if top >= 2**20 else ("KIB", 2**10)
    y_step = _nice_step(top / scale)
    y_max = max(y_step * np.ceil((top / scale) / y_step), y_step)
    n_steps = max((len(u) for _, u in series), default=1)
    x_step = max(1, int(_nice_step(n_steps)))

    canvas = Canvas(width, height)
    left, right, top_px, bottom = 70, width - 20, 40, height - 45
    plot_w, plot_h = right - left, bottom - top_px

    def px(step: float) -> int:
        return left + int(round(step / max(n_steps, 1) * plot_w))

    def py(value: float) -> int:
        return bottom - int(round(value / scale / y_max * plot_h))

    grid = (225, 225, 225)
    v = 0.0
    while v <= y_max + 1e-9:
        y = bottom - int(round(v / y_max * plot_h))
        canvas.hline(left, right, y, grid)
        canvas.text(left - 6, y - 3, _fmt(v), anchor="right")
        v += y_step
    for s in range(0, n_steps + 1, x_step):
        canvas.vline(px(s), bottom, bottom + 4, (0, 0, 0))
        canvas.text(px(s), bottom + 8, str(s), anchor="center")
    canvas.hline(left, right, bottom, (0, 0, 0))
    canvas.vline(left, top_px, bottom, (0, 0, 0))
    canvas.text(left + plot_w // 2, height - 14, "STEP (OPS IN PROGRAM ORDER)", anchor="center")
    canvas.text(8, top_px - 16, unit)
    canvas.text(width // 2, 10, title, anchor="center")

    for k, (label, usage) in enumerate(series):
        color = _PALETTE[k % len(_PALETTE)]
        for i, value in enumerate(usage):  # step function: flat over [i, i+1], vertical joins
            x0, x1, y = px(i), px(i + 1), py(value)
            canvas.rect(x0, y - 1, x1, y, color)
            if i + 1 < len(usage):
                canvas.rect(x1 - 1, py(usage[i + 1]), x1, y, color)
        canvas.hline(left, right, py(max(usage, default=0)), color, dash=4)
    canvas.rect(right - 236, top_px, right - 2, top_px + 8 + 12 * len(series), (255, 255, 255))
    for k, (label, usage) in enumerate(series):
        color = _PALETTE[k % len(_PALETTE)]
        peak = max(usage, default=0)
        legend_y = top_px + 4 + 12 * k
        canvas.rect(right - 230, legend_y + 2, right - 218, legend_y + 4, color)
        canvas.text(right - 212, legend_y, f"{label} PEAK {_fmt(peak / scale)} {unit}")
    return canvas


def plot_memory(timelines, path: str, title: str = "internal tensor memory") -> None:
    """Write a PNG of memory over time; `timelines` is a list of `(label, MemoryTimeline or usage list)`."""
    series = [(label, t.usage if hasattr(t, "usage") else t) for label, t in timelines]
    data = render_memory(series, title).png()
    with open(path, "wb") as f:
        f.write(data)
