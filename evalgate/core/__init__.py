"""The base every package stands on: errors, enums, environment, the registry, file reading and writing, number
formatting, progress, statistics, the HTML renderer and the sandbox.
"""
