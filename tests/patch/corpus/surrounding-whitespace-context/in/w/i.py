    if x:
        return 1
