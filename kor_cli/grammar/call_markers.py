"""The bytes that spell a call in a rule body (see `rules`): the lead byte `MARK` (0xF8)
and `WIDTH` base-`BASE` digits, digit d the byte `DIGIT0 + d` (0xF9..0xFF), most
significant first. No UTF-8 text holds any of these bytes."""

MARK = 0xF8  # first byte of a call marker
DIGIT0 = 0xF9  # digit d of a marker is the byte DIGIT0 + d
BASE = 7
WIDTH = 6
