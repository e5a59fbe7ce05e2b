BxJ 6ádR†Ö»oÖzAkEôÍbÐ–º‘¬Aà
¼zŽ