BScaleJ½‘
=