B	ZeroPointJ
		