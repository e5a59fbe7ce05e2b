
Bx_scaleJÇ+=)B*Y(ù(í/