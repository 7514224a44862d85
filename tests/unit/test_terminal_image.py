"""The terminal screenshots' renderer (tests/terminal_image.py): tmux's SGR codes read as a
terminal reads them, and each cell drawn in its colours."""

from __future__ import annotations

from tests.terminal_image import (
    BASIC_COLOURS,
    CURSOR_COLOUR,
    DEFAULT_BACKGROUND,
    DEFAULT_FOREGROUND,
    Style,
    apply_sgr,
    draw_screen,
    palette_colour,
    screen_cells,
)


def test_sgr_codes_set_and_reset_colours_and_styles():
    style = apply_sgr(Style(), "1;38;5;196;48;2;1;2;3")
    assert style == Style(foreground=(255, 0, 0), background=(1, 2, 3), bold=True)
    assert apply_sgr(style, "22;39") == Style(background=(1, 2, 3))
    assert apply_sgr(style, "") == Style()
    assert apply_sgr(Style(), "92").foreground == BASIC_COLOURS[10]
    assert apply_sgr(Style(), "7").colours() == (DEFAULT_BACKGROUND, DEFAULT_FOREGROUND)


def test_the_palette_is_xterms():
    assert palette_colour(16) == (0, 0, 0)
    assert palette_colour(21) == (0, 0, 255)
    assert palette_colour(231) == (255, 255, 255)
    assert palette_colour(244) == (128, 128, 128)


def test_cells_keep_their_style_across_lines_and_other_escapes_are_dropped():
    rows = screen_cells("a\x1b[96mb\n\x1b[?25lc\x1b[0md\n\n")
    assert [[character for character, _ in row] for row in rows] == [["a", "b"], ["c", "d"]]
    assert rows[0][0][1] == Style()
    assert rows[0][1][1].foreground == BASIC_COLOURS[14] == rows[1][0][1].foreground
    assert rows[1][1][1] == Style()


def test_each_cell_is_drawn_in_its_colours_and_the_cursor_shows():
    image = draw_screen("\x1b[41m \x1b[0mX \x1b[7m \x1b[0m", 6, 2, cursor=(5, 1))
    cell_width, cell_height = image.width // 6, image.height // 2
    pixels = image.load()

    def colours_in(column: int, row: int) -> set:
        return {pixels[x, y] for x in range(column * cell_width, (column + 1) * cell_width)
                for y in range(row * cell_height, (row + 1) * cell_height)}

    assert colours_in(0, 0) == {BASIC_COLOURS[1]}  # a red background, nothing written
    assert DEFAULT_FOREGROUND in colours_in(1, 0) and DEFAULT_BACKGROUND in colours_in(1, 0)  # the X
    assert colours_in(2, 0) == {DEFAULT_BACKGROUND}
    assert colours_in(3, 0) == {DEFAULT_FOREGROUND}  # reverse video: the foreground fills the cell
    assert colours_in(5, 1) == {CURSOR_COLOUR}
