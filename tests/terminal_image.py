"""A terminal screen as a picture: tmux's `capture-pane -e` text (SGR colour and style codes)
drawn cell by cell, for the editor tests' screenshots of terminal editors (docs/editors.md).

Only what `capture-pane -e` writes is read: SGR sequences (`ESC [ ... m`) for the 16 colours, the
256-colour palette, 24-bit colour, bold, italic, underline and reverse video; any other escape
sequence is dropped. Wide characters take one cell (the editors' screens here are ASCII)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from matplotlib import font_manager
from PIL import Image, ImageDraw, ImageFont

RGB = tuple[int, int, int]

DEFAULT_FOREGROUND: RGB = (224, 224, 224)
DEFAULT_BACKGROUND: RGB = (30, 30, 30)
# xterm's 16 colours (its default resources), the ones capture-pane's 30-37 / 90-97 codes name.
BASIC_COLOURS: tuple[RGB, ...] = (
    (0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205), (0, 205, 205), (229, 229, 229),
    (127, 127, 127), (255, 0, 0), (0, 255, 0), (255, 255, 0), (92, 92, 255), (255, 0, 255), (0, 255, 255),
    (255, 255, 255),
)
CURSOR_COLOUR: RGB = (200, 200, 200)
FONT_PIXELS = 16
_ESCAPE = re.compile(r"\x1b\[([0-?]*)[ -/]*([@-~])|\x1b[^\[]")  # CSI: parameters, intermediates, final byte


def palette_colour(number: int) -> RGB:
    """xterm's 256-colour palette: 16 basic colours, a 6x6x6 cube, 24 greys."""
    if number < 16:
        return BASIC_COLOURS[number]
    if number < 232:
        cube = number - 16
        levels = [0 if level == 0 else 55 + 40 * level for level in (cube // 36, cube // 6 % 6, cube % 6)]
        return levels[0], levels[1], levels[2]
    grey = 8 + 10 * (number - 232)
    return grey, grey, grey


@dataclass(frozen=True)
class Style:
    foreground: RGB | None = None  # None: the terminal's default
    background: RGB | None = None
    bold: bool = False
    italic: bool = False
    underline: bool = False
    reverse: bool = False

    def colours(self) -> tuple[RGB, RGB]:
        """(foreground, background) as drawn."""
        foreground = self.foreground or DEFAULT_FOREGROUND
        background = self.background or DEFAULT_BACKGROUND
        return (background, foreground) if self.reverse else (foreground, background)


def _extended_colour(codes: list[int], at: int) -> tuple[RGB | None, int]:
    """The colour of `38;5;N` / `38;2;R;G;B` starting at codes[at] (the 5 or 2), and the codes it used."""
    if at < len(codes) and codes[at] == 5 and at + 1 < len(codes):
        return palette_colour(codes[at + 1] % 256), 2
    if at < len(codes) and codes[at] == 2 and at + 3 < len(codes):
        red, green, blue = (max(0, min(255, value)) for value in codes[at + 1 : at + 4])
        return (red, green, blue), 4
    return None, len(codes) - at


def apply_sgr(style: Style, parameters: str) -> Style:
    """`style` after one SGR sequence's parameters ("" is a reset)."""
    codes = [int(part) if part.isdigit() else 0 for part in re.split("[;:]", parameters)] if parameters else [0]
    at = 0
    while at < len(codes):
        code = codes[at]
        at += 1
        if code == 0:
            style = Style()
        elif code in (1, 3, 4, 7):
            style = replace(style, **{{1: "bold", 3: "italic", 4: "underline", 7: "reverse"}[code]: True})
        elif code in (22, 23, 24, 27):
            style = replace(style, **{{22: "bold", 23: "italic", 24: "underline", 27: "reverse"}[code]: False})
        elif 30 <= code <= 37 or 90 <= code <= 97:
            style = replace(style, foreground=BASIC_COLOURS[code - 30 if code < 90 else code - 82])
        elif 40 <= code <= 47 or 100 <= code <= 107:
            style = replace(style, background=BASIC_COLOURS[code - 40 if code < 100 else code - 92])
        elif code in (38, 48):
            colour, used = _extended_colour(codes, at)
            at += used
            style = replace(style, **{"foreground" if code == 38 else "background": colour})
        elif code == 39:
            style = replace(style, foreground=None)
        elif code == 49:
            style = replace(style, background=None)
    return style


def screen_cells(captured: str) -> list[list[tuple[str, Style]]]:
    """Each line of a `capture-pane -e` text as (character, style) cells; the style carries over
    from line to line, as on the terminal."""
    rows: list[list[tuple[str, Style]]] = []
    style = Style()
    for line in captured.split("\n"):
        cells: list[tuple[str, Style]] = []
        at = 0
        for match in _ESCAPE.finditer(line):
            cells.extend((character, style) for character in line[at : match.start()])
            if match.group(2) == "m":
                style = apply_sgr(style, match.group(1))
            at = match.end()
        cells.extend((character, style) for character in line[at:])
        rows.append(cells)
    while rows and not rows[-1]:
        rows.pop()
    return rows


def _fonts() -> dict[tuple[bool, bool], ImageFont.FreeTypeFont]:
    """DejaVu Sans Mono in its four faces, from matplotlib's own fonts (there on every machine
    matplotlib is installed on)."""
    fonts = {}
    for bold in (False, True):
        for italic in (False, True):
            properties = font_manager.FontProperties(family="DejaVu Sans Mono", weight="bold" if bold else "normal",
                                                      style="oblique" if italic else "normal")
            fonts[(bold, italic)] = ImageFont.truetype(font_manager.findfont(properties), FONT_PIXELS)
    return fonts


def draw_screen(captured: str, width: int, height: int, cursor: tuple[int, int] | None = None) -> Image.Image:
    """The screen of `width` x `height` cells; `cursor` (column, row), 0-based: a block there."""
    fonts = _fonts()
    cell_width = round(fonts[(False, False)].getlength("M"))  # a monospace font: every advance
    ascent, descent = fonts[(False, False)].getmetrics()
    cell_height = ascent + descent
    image = Image.new("RGB", (width * cell_width, height * cell_height), DEFAULT_BACKGROUND)
    draw = ImageDraw.Draw(image)
    rows = screen_cells(captured)
    for row, cells in enumerate(rows[:height]):
        for column, (character, style) in enumerate(cells[:width]):
            foreground, background = style.colours()
            if (column, row) == cursor:
                foreground, background = background, CURSOR_COLOUR
            x, y = column * cell_width, row * cell_height
            draw.rectangle((x, y, x + cell_width - 1, y + cell_height - 1), fill=background)
            if character.strip():
                draw.text((x, y), character, font=fonts[(style.bold, style.italic)], fill=foreground)
            if style.underline:
                draw.line((x, y + cell_height - 2, x + cell_width - 1, y + cell_height - 2), fill=foreground)
    if cursor is not None and cursor[1] < height:
        column, row = cursor  # past the captured text (an empty line, the line's end): a blank cell
        if row >= len(rows) or column >= len(rows[row]):
            x, y = column * cell_width, row * cell_height
            draw.rectangle((x, y, x + cell_width - 1, y + cell_height - 1), fill=CURSOR_COLOUR)
    return image


def save_screen(captured: str, width: int, height: int, path: Path, cursor: tuple[int, int] | None = None) -> None:
    draw_screen(captured, width, height, cursor).save(path)
