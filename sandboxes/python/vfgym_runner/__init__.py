"""Parts of the in-container runner (runner.py), copied into the image beside it.

Standard library only. The Python session removes these modules from sys.modules
before user code runs, so they never shadow the user's own.
"""
