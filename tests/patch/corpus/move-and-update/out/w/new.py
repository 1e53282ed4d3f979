print('b')
