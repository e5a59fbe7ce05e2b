%Bx_zero_pointJ%_дрдyyєЌЮћЙ™-HЎ
o‡БнcAйґ\_ХО^Й/