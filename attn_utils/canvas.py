"""The geometry of chapter 7a's canvases, shared by their generator (``data.digits``) and the model
that reads them (``glimpse``), so that neither imports the other.

A canvas is a grid of square regions; each region holds one ``DIGIT`` x ``DIGIT`` handwritten digit
inside a ``MARGIN`` where the frames are drawn.
"""

DIGIT = 8  # load_digits images are 8 x 8
MARGIN = 1  # a 1-pixel margin around each digit, where the frames are drawn
REGION = DIGIT + 2 * MARGIN  # each region of the canvas is 10 x 10
