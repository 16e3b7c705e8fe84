"""A step's table wider than an 800 px page says so beside its shape: at GPT-2's size a vector is shown 64 numbers a
row (one head's width), of which such a page shows 11, with only a faint fade at the edge as a hint."""

import numpy as np

from explorer.present.steps import FITTING_COLUMNS, shape_text, steps_html
from explorer.views.steps import Step


def vector(d_model: int, d_head: int) -> Step:
    return Step("Residual stream going in", "x_t", np.zeros((d_model // d_head, d_head)), tensor_shape=(d_model,),
                layout=f"shown in rows of {d_head}")


def test_a_table_wider_than_a_narrow_page_says_it_scrolls_and_how_many_columns_it_has():
    assert shape_text(vector(768, 64)) == "shape (768,), shown in rows of 64; scroll sideways for all 64 columns →"
    assert "scroll sideways for all 64 columns" in steps_html([vector(768, 64)])
    scores = Step("Scores, mask and softmax", "q·k", np.zeros((3, 47)))  # one column per key token
    assert shape_text(scores) == "shape (3, 47); scroll sideways for all 47 columns →"


def test_a_table_that_fits_says_nothing_more():
    assert shape_text(vector(32, 8)) == "shape (32,), shown in rows of 8"
    assert "scroll" not in shape_text(vector(FITTING_COLUMNS * 4, FITTING_COLUMNS))
    assert "scroll" not in shape_text(Step("Output of head 0", "o", np.zeros(8)))  # one row, a 1-D vector
