def f():
    x = 1
    return x

def g():
    x = 1
    return x
