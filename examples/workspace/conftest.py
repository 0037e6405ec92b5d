# Lets `python -m pytest` import the project's modules from the workspace root.
