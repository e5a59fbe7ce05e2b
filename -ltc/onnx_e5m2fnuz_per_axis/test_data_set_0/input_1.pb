
Bx_scaleJÀ+Ö,L.