"""The PNG line-chart renderer: the PNG it writes (read back by a decoder of
the test's own, checking every CRC), the drawing primitives, the font, the
axes and the chart's pixels."""

import struct
import zlib

import pytest

from ansible_collections.mlinfra.multinode.plugins.module_utils.report import png_chart as pc

BLUE = (31, 119, 180)


def decode_png(data):
    """(width, height, rows): rows of (r, g, b) tuples of an 8-bit RGB PNG
    without interlace whose scanlines all use filter 0. Checks the signature,
    every chunk's CRC, the chunk order and the data length."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, chunks = 8, []
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        crc = struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])[0]
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, kind
        chunks.append((kind, body))
        offset += 12 + length
    assert offset == len(data)
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    width, height, depth, color, method, filtering, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, color, method, filtering, interlace) == (8, 2, 0, 0, 0)
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = 1 + 3 * width
    assert len(raw) == stride * height
    rows = []
    for y in range(height):
        line = raw[y * stride:(y + 1) * stride]
        assert line[0] == 0, "scanline %d uses filter %d" % (y, line[0])
        rows.append([tuple(line[1 + 3 * x:4 + 3 * x]) for x in range(width)])
    return width, height, rows


def coloured(rows, color):
    return set((x, y) for y, row in enumerate(rows) for x, pixel in enumerate(row) if pixel == color)


# --- PNG -----------------------------------------------------------------------

def test_png_round_trip_of_every_pixel():
    canvas = pc.Canvas(7, 5, background=(1, 2, 3))
    canvas.fill_rect(1, 1, 2, 3, (250, 0, 10))
    canvas.fill_rect(6, 4, 6, 4, (0, 255, 0))
    width, height, rows = decode_png(canvas.png())
    assert (width, height) == (7, 5)
    assert coloured(rows, (250, 0, 10)) == set((x, y) for x in (1, 2) for y in (1, 2, 3))
    assert coloured(rows, (0, 255, 0)) == {(6, 4)}
    assert len(coloured(rows, (1, 2, 3))) == 35 - 7
    assert rows == [[canvas.get(x, y) for x in range(7)] for y in range(5)]


def test_png_is_deterministic_and_rejects_empty_canvases():
    first, second = pc.Canvas(30, 20), pc.Canvas(30, 20)
    for canvas in (first, second):
        canvas.line(0, 0, 29, 19, BLUE)
    assert first.png() == second.png()
    with pytest.raises(ValueError, match="at least 1x1"):
        pc.Canvas(0, 10)


# --- primitives ------------------------------------------------------------------

def test_lines_are_two_pixels_wide_and_clipped():
    canvas = pc.Canvas(40, 20)
    canvas.line(5, 10, 30, 10, BLUE)
    on = set((x, y) for x in range(40) for y in range(20) if canvas.get(x, y) == BLUE)
    assert on == set((x, y) for x in range(5, 32) for y in (10, 11))
    canvas.line(-10, -10, 50, 50, BLUE)  # outside the canvas: clipped, no error
    assert canvas.get(0, 0) == BLUE and canvas.get(19, 19) == BLUE


def test_dashed_lines_leave_gaps():
    canvas = pc.Canvas(40, 5)
    canvas.line(0, 2, 39, 2, BLUE, width=1, dash=(4, 3))
    row = "".join("#" if canvas.get(x, 2) == BLUE else "." for x in range(40))
    assert row == ("####..." * 6)[:40]


def test_disc_and_rect():
    canvas = pc.Canvas(21, 21)
    canvas.disc(10, 10, 4, pc.RED)
    assert canvas.get(10, 10) == pc.RED and canvas.get(14, 10) == pc.RED and canvas.get(10, 6) == pc.RED
    assert canvas.get(15, 10) == pc.WHITE and canvas.get(14, 14) == pc.WHITE
    canvas.rect(0, 0, 20, 20, BLUE)
    assert canvas.get(0, 7) == BLUE and canvas.get(20, 20) == BLUE and canvas.get(1, 1) == pc.WHITE


# --- the font --------------------------------------------------------------------

def test_the_font_covers_labels_and_every_glyph_differs():
    needed = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz./-_()%:= "
    assert set(needed) <= set(pc.FONT)
    assert all(len(rows) in (7, 8) and all(0 <= bits < 32 for bits in rows) for rows in pc.FONT.values())
    glyphs = [rows + (0,) * (8 - len(rows)) for char, rows in pc.FONT.items()]
    assert len(set(glyphs)) == len(glyphs)


def ink(canvas):
    points = [(x, y) for y in range(canvas.height) for x in range(canvas.width) if canvas.get(x, y) != pc.WHITE]
    return min(x for x, _y in points), min(y for _x, y in points), max(x for x, _y in points), \
        max(y for _x, y in points)


def test_text_is_drawn_from_its_glyphs_at_any_scale_and_upright():
    canvas = pc.Canvas(40, 20)
    canvas.text(2, 3, "1K", pc.TEXT)
    # "1": 0x04 on its first row, so its top pixel is column 2; "K" spans columns 6-10.
    assert canvas.get(4, 3) == pc.TEXT and canvas.get(3, 3) == pc.WHITE
    assert ink(canvas) == (3, 3, 12, 9)
    assert pc.text_width("1K") == 11 and pc.text_width("1K", 2) == 22
    large = pc.Canvas(40, 30)
    large.text(0, 0, "g", pc.TEXT, scale=2)
    assert ink(large)[3] == 15  # the descender: 8 rows of 2 px
    upright = pc.Canvas(20, 40)
    upright.text(5, 30, "ab", pc.TEXT, vertical=True)
    left, top, right, bottom = ink(upright)
    assert (left, bottom) == (5, 30) and right - left < bottom - top  # reads upwards: taller than wide


def test_unknown_characters_are_drawn_as_question_marks():
    first, second = pc.Canvas(10, 10), pc.Canvas(10, 10)
    first.text(0, 0, "\u00e9", pc.TEXT)
    second.text(0, 0, "?", pc.TEXT)
    assert first.pixels == second.pixels


# --- axes ------------------------------------------------------------------------

@pytest.mark.parametrize("value, text", [(1, "1"), (512, "512"), (1024, "1K"), (2 ** 26, "64M"), (2 ** 33, "8G"),
                                         (2 ** 41, "2T"), (1536, "1536")])
def test_binary_labels(value, text):
    assert pc.format_binary(value) == text


@pytest.mark.parametrize("top, labels", [
    (380, ["0", "100", "200", "300", "400"]),
    (1.4, ["0.00", "0.25", "0.50", "0.75", "1.00", "1.25", "1.50"]),
    (0.39, ["0.0", "0.1", "0.2", "0.3", "0.4"]),
    (0, ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]),
])
def test_linear_ticks_start_at_zero_and_reach_the_top(top, labels):
    ticks = pc.nice_ticks(top)
    assert ticks[0] == 0 and ticks[-1] >= top
    assert pc.format_ticks(ticks) == labels


# --- the chart -----------------------------------------------------------------------

SIZES = [2 ** power for power in range(20, 34)]  # 1M .. 8G


def chart(values, **extra):
    result = pc.LineChart(900, 540, title="a title", subtitle=[("run ", pc.TEXT), ("PASS", pc.GREEN)],
                          x_label="message size (bytes)", y_label="busbw (GB/s)", **extra)
    result.line("all_reduce", list(zip(SIZES, values)), BLUE)
    return result


def test_points_land_where_pixel_says_on_a_log2_axis():
    values = [350.0 * size / (size + 2 ** 25) for size in SIZES]
    line_chart = chart(values)
    width, height, rows = decode_png(line_chart.png())
    assert (width, height) == (900, 540)
    left, top, right, bottom = line_chart.frame
    xs = [line_chart.pixel(size, 1)[0] for size in SIZES]
    gaps = set(b - a for a, b in zip(xs, xs[1:]))
    assert max(gaps) - min(gaps) <= 1  # equal steps per doubling
    assert left < xs[0] < xs[-1] < right
    assert line_chart.pixel(SIZES[0], 0)[1] == bottom and line_chart.y_ticks[-1] == 400
    for size, value in zip(SIZES, values):
        x, y = line_chart.pixel(size, value)
        assert rows[y][x] == BLUE and rows[y - 3][x] == BLUE  # on the point's marker disc
    # Far from the curve, above its first points: background.
    x, y = line_chart.pixel(SIZES[0], 300)
    assert rows[y][x] != BLUE


def test_step_line_markers_and_legend():
    values = [100.0] * len(SIZES)
    line_chart = chart(values)
    line_chart.step("gate", [(2 ** 30, 194.0), (2 ** 32, 250.0)], pc.GREY)
    line_chart.markers("fails", [(2 ** 31, 100.0)], pc.RED)
    width, height, rows = decode_png(line_chart.png())
    x, y = line_chart.pixel(2 ** 31, 100.0)
    assert rows[y][x] == BLUE and rows[y][x + 7] == pc.RED and rows[y][x - 7] == pc.RED
    # Red only there, and in the legend's sample.
    box = line_chart.legend[1]
    red = [(px, py) for px, py in coloured(rows, pc.RED) if not (box[0] <= px <= box[2] and box[1] <= py <= box[3])]
    assert red and all(abs(px - x) <= 8 and abs(py - y) <= 8 for px, py in red)
    # The first level from 1G until 4G, then the second one, half a step beyond 4G.
    start, level = line_chart.pixel(2 ** 30, 194.0)
    change, second = line_chart.pixel(2 ** 32, 250.0)
    grey = coloured(rows, pc.GREY)
    assert (start, level) in grey and (change - 1, level) in grey and (start - 3, level) not in grey
    assert (change, (level + second) // 2) in grey or (change, (level + second) // 2 + 1) in grey
    assert any((px, second) in grey for px in range(change + 2, change + 14))  # dashes of 7 px, gaps of 5
    # The legend is in the upper left corner, the data being low: its names are drawn there.
    assert line_chart.legend[0] == "inside"
    assert box[0] < line_chart.frame[0] + 40 and box[1] < line_chart.frame[1] + 40
    assert coloured([row[box[0]:box[2]] for row in rows[box[1]:box[3]]], pc.TEXT)


def test_crowded_charts_put_the_legend_below():
    line_chart = pc.LineChart(900, 540)
    for index in range(6):
        line_chart.line("op %d" % index, [(size, 50.0 * (index + 1)) for size in SIZES], pc.PALETTE[index])
    line_chart.png()
    assert line_chart.legend[0] == "below"
    assert line_chart.frame[3] < 540 - 3 * 8 * 2 - 12 * 2 * len(line_chart.legend[1])


def test_chart_output_is_deterministic():
    values = [float(index) for index in range(len(SIZES))]
    assert chart(values).png() == chart(values).png()
    assert chart(values).png() != chart(values[:-1] + [99.0]).png()


def test_long_titles_are_cut_short():
    long_chart = chart([1.0] * len(SIZES))
    long_chart.title = "x" * 500
    long_chart.subtitle = [("y" * 300, pc.TEXT), ("FAIL", pc.RED)]
    canvas = long_chart.render()
    assert pc.RED not in set(canvas.get(x, y) for y in range(40) for x in range(900))
    assert long_chart._fit("x" * 500).endswith("...") and len(long_chart._fit("x" * 500)) == (900 - 16) // 12


def test_a_long_subtitle_wraps_between_words_and_loses_nothing():
    nodes = ", ".join("moc-r4pcc04u%02d-nairr" % number for number in (9, 11, 12, 16))
    wrapped = chart([1.0] * len(SIZES))
    wrapped.subtitle = [("verdict: ", pc.TEXT), ("PASS, 3 not checked", pc.GREEN),
                        (" - 4 ranks on 4 nodes (%s), float32, gloo" % nodes, pc.TEXT)]
    wrapped.render()
    room = (900 - 16) // 12
    lines = ["".join(text for text, _color in line) for line in wrapped.subtitle_lines]
    assert len(lines) == 3 and all(len(line) <= room for line in lines), lines
    # Every word is there, in order; the verdict keeps its colour.
    assert " ".join(lines).split() == "".join(text for text, _color in wrapped.subtitle).split()
    assert ("PASS, ", pc.GREEN) in wrapped.subtitle_lines[0]
    # The plot moves down by the two lines more.
    single = chart([1.0] * len(SIZES))
    single.render()
    assert wrapped.frame[1] - single.frame[1] == 2 * (pc.LINE_HEIGHT + 5) * single.scale
    # Past SUBTITLE_LINES lines, the last one holds the rest, cut short
    # when drawn.
    wrapped.subtitle = [("word " * 200, pc.TEXT)]
    wrapped.render()
    assert len(wrapped.subtitle_lines) == pc.SUBTITLE_LINES
    assert len("".join(text for text, _color in wrapped.subtitle_lines[-1])) > room


@pytest.mark.parametrize("points, words", [([], "no points"), ([(0, 1.0)], "above 0")])
def test_charts_without_a_plottable_point_are_refused(points, words):
    empty = pc.LineChart()
    if points:
        empty.line("x", points, BLUE)
    with pytest.raises(ValueError, match=words):
        empty.png()


def test_too_small_charts_are_refused():
    tiny = pc.LineChart(120, 60, title="t", x_label="x", y_label="y")
    tiny.line("x", [(1024, 1.0)], BLUE)
    with pytest.raises(ValueError, match="no room to plot"):
        tiny.png()
