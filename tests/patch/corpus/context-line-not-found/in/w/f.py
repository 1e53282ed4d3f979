def present():
    x
