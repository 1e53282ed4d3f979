import os

def f():
    return 2
