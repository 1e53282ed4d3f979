    if x:
        return 2
