# -*- coding: utf-8 -*-
# Copyright: mlinfra.multinode contributors
# Apache License 2.0 (see LICENSE)
"""A small raster line chart, written as PNG with the standard library only.

Canvas draws on an RGB buffer (rectangles, 2 px lines that may be dashed,
filled discs, text in a built-in 5x7 bitmap font) and encodes it as PNG
(IHDR, one IDAT of zlib-compressed rows with filter 0, IEND). LineChart lays
out a chart on it: a log2 x axis whose ticks are powers of two labelled in
binary units (1K, 64M, 8G), or a counting x axis (runs, pairs: 1, 2, 3), a
linear y axis from 0, grid, title, legend.

Nothing is anti-aliased and nothing depends on fonts or libraries of the
machine, so the same chart gives the same bytes everywhere.
"""

from __future__ import absolute_import, division, print_function

import math
import re
import struct
import zlib

__metaclass__ = type

WHITE = (255, 255, 255)
TEXT = (33, 33, 33)
AXIS = (90, 90, 90)
GRID = (228, 228, 228)
GREY = (110, 110, 110)
RED = (214, 39, 40)
GREEN = (30, 130, 50)
# Line colours, none of them red, which marks failures.
PALETTE = ((31, 119, 180), (44, 160, 44), (148, 103, 189), (23, 190, 207), (140, 86, 75), (188, 189, 34))

# 5x7 glyphs, one number per row, top to bottom, 0x10 the leftmost pixel. An
# eighth row is a descender below the baseline (g, j, p, q, y, comma).
FONT = {
    " ": (0, 0, 0, 0, 0, 0, 0),
    "0": (0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E), "1": (0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E),
    "2": (0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F), "3": (0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E),
    "4": (0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02), "5": (0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E),
    "6": (0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E), "7": (0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08),
    "8": (0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E), "9": (0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C),
    "A": (0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11), "B": (0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E),
    "C": (0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E), "D": (0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C),
    "E": (0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F), "F": (0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10),
    "G": (0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F), "H": (0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11),
    "I": (0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E), "J": (0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C),
    "K": (0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11), "L": (0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F),
    "M": (0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11), "N": (0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11),
    "O": (0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E), "P": (0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10),
    "Q": (0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D), "R": (0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11),
    "S": (0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E), "T": (0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04),
    "U": (0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E), "V": (0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04),
    "W": (0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A), "X": (0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11),
    "Y": (0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04), "Z": (0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F),
    "a": (0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F), "b": (0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E),
    "c": (0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E), "d": (0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F),
    "e": (0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E), "f": (0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08),
    "g": (0x00, 0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E), "h": (0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11),
    "i": (0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E), "j": (0x02, 0x00, 0x06, 0x02, 0x02, 0x02, 0x12, 0x0C),
    "k": (0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12), "l": (0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E),
    "m": (0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11), "n": (0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11),
    "o": (0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E), "p": (0x00, 0x00, 0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10),
    "q": (0x00, 0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x01), "r": (0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10),
    "s": (0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E), "t": (0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06),
    "u": (0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D), "v": (0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04),
    "w": (0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A), "x": (0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11),
    "y": (0x00, 0x00, 0x11, 0x11, 0x11, 0x0F, 0x01, 0x0E), "z": (0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F),
    ".": (0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C), ",": (0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08),
    "/": (0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00), "-": (0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00),
    "_": (0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F), "(": (0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02),
    ")": (0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08), "%": (0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03),
    ":": (0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00), "=": (0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00),
    "+": (0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00), ">": (0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08),
    "<": (0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02), "#": (0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A),
    "'": (0x0C, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00), "!": (0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04),
    "[": (0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E), "]": (0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E),
    "?": (0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04),
}
GLYPH_ADVANCE = 6   # 5 columns and a blank one
LINE_HEIGHT = 8     # 7 rows and the descender
SUBTITLE_LINES = 3  # a subtitle longer than this many lines is cut short


def text_width(text, scale=1):
    """Pixels the text takes along its line."""
    return max(0, len(text) * GLYPH_ADVANCE * scale - scale)


def encode_png(width, height, pixels):
    """PNG bytes of an 8-bit RGB image (``pixels``: rows of width * 3 bytes)."""
    stride = width * 3
    raw = b"".join(b"\x00" + bytes(pixels[row * stride:(row + 1) * stride]) for row in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # depth 8, RGB, deflate, filter 0, no interlace
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


class Canvas:
    """An RGB image with drawing primitives; coordinates outside it are clipped."""

    def __init__(self, width, height, background=WHITE):
        if width < 1 or height < 1:
            raise ValueError("a canvas needs at least 1x1 pixels, got %rx%r" % (width, height))
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def get(self, x, y):
        index = (y * self.width + x) * 3
        return tuple(self.pixels[index:index + 3])

    def fill_rect(self, x0, y0, x1, y1, color):
        """Fills the rectangle with corners (x0, y0) and (x1, y1), both included."""
        x0, x1 = max(0, min(x0, x1)), min(self.width - 1, max(x0, x1))
        y0, y1 = max(0, min(y0, y1)), min(self.height - 1, max(y0, y1))
        if x0 > x1 or y0 > y1:
            return
        run = bytes(color) * (x1 - x0 + 1)
        for y in range(y0, y1 + 1):
            start = (y * self.width + x0) * 3
            self.pixels[start:start + len(run)] = run

    def rect(self, x0, y0, x1, y1, color):
        """The outline of a rectangle, 1 px."""
        for edge in ((x0, y0, x1, y0), (x0, y1, x1, y1), (x0, y0, x0, y1), (x1, y0, x1, y1)):
            self.fill_rect(edge[0], edge[1], edge[2], edge[3], color)

    def line(self, x0, y0, x1, y1, color, width=2, dash=None):
        """Bresenham's line, ``width`` px thick; ``dash`` (on, off) in px along its longer axis."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        error, step = dx + dy, 0
        low, high = (width - 1) // 2, width // 2
        while True:
            if dash is None or step % (dash[0] + dash[1]) < dash[0]:
                self.fill_rect(x0 - low, y0 - low, x0 + high, y0 + high, color)
            if x0 == x1 and y0 == y1:
                return
            double, step = 2 * error, step + 1
            if double >= dy:
                error += dy
                x0 += sx
            if double <= dx:
                error += dx
                y0 += sy

    def disc(self, cx, cy, radius, color):
        """A filled disc centred on (cx, cy)."""
        for dy in range(-radius, radius + 1):
            half = int(math.sqrt(radius * radius + radius - dy * dy)) if radius * radius + radius >= dy * dy else -1
            if half >= 0:
                self.fill_rect(cx - half, cy + dy, cx + half, cy + dy, color)

    def text(self, x, y, text, color, scale=1, vertical=False, bold=False):
        """Draws text with its top left corner at (x, y); vertical text reads
        upwards from its bottom left corner at (x, y). Characters the font
        lacks are drawn as '?'."""
        for position, char in enumerate(text):
            rows = FONT.get(char, FONT["?"])
            for row, bits in enumerate(rows):
                for column in range(5):
                    if not bits & (0x10 >> column):
                        continue
                    along = position * GLYPH_ADVANCE + column
                    for extra in range(max(1, scale // 2) + 1 if bold else 1):
                        if vertical:
                            left, top = x + row * scale, y - (along + 1) * scale + 1 - extra
                        else:
                            left, top = x + along * scale + extra, y + row * scale
                        self.fill_rect(left, top, left + scale - 1, top + scale - 1, color)

    def png(self):
        return encode_png(self.width, self.height, self.pixels)


def format_binary(value):
    """A power of two in binary units: 512, 1K, 64M, 8G, 2T."""
    value = int(round(value))
    for unit, shift in (("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if value >= 1 << shift and value % (1 << shift) == 0:
            return "%d%s" % (value >> shift, unit)
    return "%d" % value


def nice_ticks(top, target=6):
    """Ticks 0, step, 2 step, ... of a linear axis from 0 reaching at least
    ``top``, the step being 1, 2, 2.5 or 5 times a power of ten."""
    if not top > 0:
        top = 1.0
    rough = top / target
    magnitude = 10 ** math.floor(math.log10(rough))
    step = next(factor * magnitude for factor in (1, 2, 2.5, 5, 10) if factor * magnitude >= rough * (1 - 1e-9))
    count = int(math.ceil(top / step - 1e-9))
    return [index * step for index in range(count + 1)]


def format_ticks(values):
    """The values as text, all with the fewest decimals that show each exactly."""
    for decimals in range(7):
        if all(abs(round(value, decimals) - value) < 1e-9 * max(1.0, abs(value)) for value in values):
            return ["%.*f" % (decimals, value) for value in values]
    return ["%g" % value for value in values]


class LineChart:
    """Series against a log2 x axis (``counting``: whole numbers 1, 2, 3)
    and a linear y axis from 0.

    Add series with line(), step() and markers(), then call png(). After
    layout() (which png() calls), pixel() maps data to canvas coordinates.
    Text is drawn at ``scale`` times the 5x7 font (default: 1 px per font
    pixel below 900x540, 2 from 900x540, 3 from 1350x810 and so on)."""

    def __init__(self, width=900, height=540, title="", subtitle=(), x_label="", y_label="", scale=None,
                 counting=False):
        self.width, self.height, self.counting = width, height, counting
        self.title, self.x_label, self.y_label = title, x_label, y_label
        # Subtitle: a string, or (text, colour) runs drawn one after another.
        self.subtitle = ([(subtitle, TEXT)] if subtitle else []) if isinstance(subtitle, str) else list(subtitle)
        self.scale = scale or max(1, min(width // 450, height // 270))
        self.series = []
        self.frame = None

    def line(self, name, points, color, marker=2):
        """A polyline through (x, y) points, sorted by x, with a disc of radius ``marker`` at each."""
        self.series.append({"kind": "line", "name": name, "points": sorted(points), "color": color, "radius": marker})

    def step(self, name, points, color, dash=(7, 5)):
        """A dashed step line: each point's y from its x to the next point's x (dashes longer from scale 4)."""
        dash = tuple(length * max(1, self.scale // 2) for length in dash)
        self.series.append({"kind": "step", "name": name, "points": sorted(points), "color": color, "dash": dash})

    def markers(self, name, points, color, radius=4):
        """Discs at the points, drawn before the lines' markers: where both are, a ring around those."""
        self.series.append({"kind": "markers", "name": name, "points": sorted(points), "color": color,
                            "radius": radius})

    # --- layout -------------------------------------------------------------

    def layout(self):
        """Places the plot area (``frame``: left, top, right, bottom) and the
        legend: inside the plot, in the first corner the data leaves free (upper
        left, upper right, lower right, lower left), else in rows below it."""
        points = [point for series in self.series for point in series["points"]]
        if not points:
            raise ValueError("nothing to plot: the chart has no points")
        if any(x <= 0 for x, _y in points):
            raise ValueError("a log2 x axis needs x values above 0")
        scale, text_h = self.scale, LINE_HEIGHT * self.scale
        lows, highs = min(self._x(x) for x, _y in points), max(self._x(x) for x, _y in points)
        pad = 0.5 if highs > lows or self.counting else 1.0
        self.x_range = (lows - pad, highs + pad)
        self.y_ticks = nice_ticks(max(y for _x, y in points) * 1.08)
        self.y_labels = format_ticks(self.y_ticks)
        left = 6 * scale + text_h + 6 * scale + max(text_width(label, scale) for label in self.y_labels) + 6 * scale
        self.subtitle_lines = self._wrap(self.subtitle)
        top = 8 * scale + (text_h + 5 * scale) * (1 + len(self.subtitle_lines)) + 4 * scale
        bottom = 6 * scale + text_h + 6 * scale + text_h + 5 * scale
        right = text_width("512M", scale) // 2 + 8 * scale
        self.frame = (left, top, self.width - 1 - right, self.height - 1 - bottom)
        self.legend = None
        entries = self.series_with_names()
        if entries:
            size = (32 * scale + max(text_width(series["name"], scale) for series in entries),
                    self.legend_row * len(entries) + 6 * scale)
            boxes = [self._legend_box(corner, size) for corner in ("tl", "tr", "br", "bl")]
            free = [box for box in boxes if not self._crowding(box)]
            if free:
                self.legend = ("inside", free[0])
            else:
                rows = [[]]
                for series in entries:
                    used = sum(self._entry_width(entry) for entry in rows[-1])
                    if rows[-1] and left + used + self._entry_width(series) > self.width - 8 * scale:
                        rows.append([])
                    rows[-1].append(series)
                self.legend = ("below", rows)
                self.frame = self.frame[:3] + (self.frame[3] - len(rows) * self.legend_row - 2 * scale,)
        if self.frame[2] - self.frame[0] < 40 * scale or self.frame[3] - self.frame[1] < 30 * scale:
            raise ValueError("a %dx%d chart leaves no room to plot: make it larger" % (self.width, self.height))
        return self.frame

    @property
    def legend_row(self):
        return 12 * self.scale

    def _entry_width(self, series):
        return 26 * self.scale + text_width(series["name"], self.scale) + 14 * self.scale

    def pixel(self, x, y):
        """Canvas coordinates of the data point (x, y)."""
        left, top, right, bottom = self.frame
        low, high = self.x_range
        px = left + (self._x(x) - low) / (high - low) * (right - left)
        py = bottom - y / self.y_ticks[-1] * (bottom - top)
        return int(round(px)), int(round(py))

    def _x(self, x):
        return x if self.counting else math.log(x, 2)

    def _x_ticks(self):
        """The ticks in range (powers of two, or whole numbers when
        counting), and every how many of them is labelled."""
        low, high = self.x_range
        powers = list(range(int(math.ceil(low)), int(math.floor(high)) + 1))
        span = (self.frame[2] - self.frame[0]) / (high - low)
        widest = text_width("512M", self.scale) + 10 * self.scale
        every = next((n for n in (1, 2, 5, 10, 20) if n * span >= widest), 40)
        return powers, every

    # --- drawing ------------------------------------------------------------

    def render(self):
        """The chart drawn on a new Canvas."""
        self.layout()
        canvas = Canvas(self.width, self.height)
        scale, text_h = self.scale, LINE_HEIGHT * self.scale
        left, top, right, bottom = self.frame
        powers, every = self._x_ticks()
        for value, label in zip(self.y_ticks, self.y_labels):
            y = self.pixel(1, value)[1]
            canvas.fill_rect(left, y, right, y, GRID)
            canvas.fill_rect(left - 4 * scale, y, left, y, AXIS)
            canvas.text(left - 6 * scale - text_width(label, scale), y - 7 * scale // 2, label, TEXT, scale)
        for power in powers:
            x = self.pixel(power if self.counting else 2.0 ** power, 0)[0]
            if power % every == 0 or (self.counting and every > 1 and power == 1):
                canvas.fill_rect(x, top, x, bottom, GRID)
                canvas.fill_rect(x, bottom, x, bottom + 4 * scale, AXIS)
                label = str(power) if self.counting else format_binary(2 ** power)
                canvas.text(x - text_width(label, scale) // 2, bottom + 6 * scale, label, TEXT, scale)
            else:
                canvas.fill_rect(x, bottom, x, bottom + 2 * scale, AXIS)
        canvas.rect(left, top, right, bottom, AXIS)
        self._draw_series(canvas)
        self._draw_legend(canvas)
        labels_at = bottom + 6 * scale + text_h + 6 * scale
        canvas.text((left + right - text_width(self.x_label, scale)) // 2, labels_at, self.x_label, TEXT, scale)
        canvas.text(6 * scale, (top + bottom + text_width(self.y_label, scale)) // 2, self.y_label, TEXT, scale,
                    vertical=True)
        title = self._fit(self.title)
        canvas.text((self.width - text_width(title, scale)) // 2, 8 * scale, title, TEXT, scale, bold=True)
        for index, runs in enumerate(self.subtitle_lines):
            self._draw_runs(canvas, 8 * scale + (text_h + 5 * scale) * (1 + index), runs)
        return canvas

    def _fit(self, text):
        """The text, cut short with '...' where it is wider than the canvas."""
        room = (self.width - 8 * self.scale) // (GLYPH_ADVANCE * self.scale)
        return text if len(text) <= room else text[:max(0, room - 3)] + "..."

    def _wrap(self, runs):
        """(text, colour) runs broken into lines between words where one
        line is too narrow (node names are long), at most
        SUBTITLE_LINES of them; what does not fit then is cut short on the
        last one by _draw_runs."""
        room = (self.width - 8 * self.scale) // (GLYPH_ADVANCE * self.scale)
        lines, current, used = [], [], 0
        for text, color in runs:
            for word in re.findall(r"\S+\s*|\s+", text):
                if current and used + len(word.rstrip()) > room and len(lines) < SUBTITLE_LINES - 1:
                    lines.append(current)
                    current, used = [], 0
                    word = word.lstrip()
                current.append((word, color))
                used += len(word)
        if current:
            lines.append(current)
        return [line[:-1] + [(line[-1][0].rstrip(), line[-1][1])] for line in lines if line]

    def _draw_runs(self, canvas, y, runs):
        """(text, colour) runs centred on one line, cut short like _fit()."""
        whole = "".join(text for text, _color in runs)
        fitted = self._fit(whole)
        room = len(fitted) - (3 if len(fitted) < len(whole) else 0)
        pieces = []
        for text, color in runs:
            pieces.append((text[:max(0, room)], color))
            room -= len(text)
        if len(fitted) < len(whole):
            pieces.append(("...", TEXT))
        x = (self.width - text_width(fitted, self.scale)) // 2
        for text, color in pieces:
            canvas.text(x, y, text, color, self.scale)
            x += len(text) * GLYPH_ADVANCE * self.scale

    def _draw_series(self, canvas):
        width = max(2, self.scale)
        for series in [s for s in self.series if s["kind"] == "step"]:
            # Each level holds from its point to the next one; the last for half a step beyond it.
            pixels = [self.pixel(x, y) for x, y in series["points"]]
            ends = [px for px, _py in pixels[1:]]
            last = pixels[-1][0]
            ends.append(last + ((last - pixels[-2][0]) // 2 if len(pixels) > 1 else 12 * self.scale))
            starts = [pixels[0][0] - (12 * self.scale if len(pixels) == 1 else 0)] + ends[:-1]
            for index, (start, end) in enumerate(zip(starts, ends)):
                level = pixels[index][1]
                canvas.line(start, level, end, level, series["color"], width, series["dash"])
                if index + 1 < len(pixels) and pixels[index + 1][1] != level:
                    canvas.line(end, level, end, pixels[index + 1][1], series["color"], width, series["dash"])
        for series in [s for s in self.series if s["kind"] == "line"]:
            pixels = [self.pixel(x, y) for x, y in series["points"]]
            for (x0, y0), (x1, y1) in zip(pixels, pixels[1:]):
                canvas.line(x0, y0, x1, y1, series["color"], width)
        for kind in ("markers", "line"):  # marker discs under the lines' own: rings around them
            for series in [s for s in self.series if s["kind"] == kind]:
                for x, y in series["points"]:
                    px, py = self.pixel(x, y)
                    canvas.disc(px, py, series["radius"] * self.scale, series["color"])

    def _legend_box(self, corner, size):
        left, top, right, bottom = self.frame
        margin = 8 * self.scale
        x = left + margin if corner[1] == "l" else right - margin - size[0]
        y = top + margin if corner[0] == "t" else bottom - margin - size[1]
        return x, y, x + size[0], y + size[1]

    def _crowding(self, box):
        """How many sampled points of the series fall in the box."""
        count = 0
        for series in self.series:
            pixels = [self.pixel(x, y) for x, y in series["points"]]
            for (x0, y0), (x1, y1) in zip(pixels, pixels[1:] or pixels):
                for index in range(17):
                    x, y = x0 + (x1 - x0) * index / 16.0, y0 + (y1 - y0) * index / 16.0
                    count += box[0] - 10 <= x <= box[2] + 10 and box[1] - 10 <= y <= box[3] + 10
        return count

    def _draw_legend(self, canvas):
        if self.legend is None:
            return
        scale = self.scale
        if self.legend[0] == "inside":
            box = self.legend[1]
            canvas.fill_rect(box[0], box[1], box[2], box[3], WHITE)
            canvas.rect(box[0], box[1], box[2], box[3], AXIS)
            for index, series in enumerate(self.series_with_names()):
                self._draw_entry(canvas, box[0] + 5 * scale, box[1] + 3 * scale + self.legend_row * index, series)
        else:
            y = self.frame[3] + 6 * scale + 2 * (LINE_HEIGHT * scale + 6 * scale)
            for row in self.legend[1]:
                x = self.frame[0]
                for series in row:
                    self._draw_entry(canvas, x, y, series)
                    x += self._entry_width(series)
                y += self.legend_row

    def series_with_names(self):
        return [series for series in self.series if series["name"]]

    def _draw_entry(self, canvas, x, y, series):
        """One legend entry, its sample and its name, in a row whose top is y."""
        scale, middle = self.scale, y + self.legend_row // 2
        width = max(2, scale)
        if series["kind"] == "step":
            canvas.line(x, middle, x + 20 * scale, middle, series["color"], width, series["dash"])
        elif series["kind"] == "line":
            canvas.line(x, middle, x + 20 * scale, middle, series["color"], width)
        if series["kind"] != "step":
            canvas.disc(x + 10 * scale, middle, series["radius"] * scale, series["color"])
        canvas.text(x + 26 * scale, middle - 7 * scale // 2, series["name"], TEXT, scale)

    def png(self):
        return self.render().png()
