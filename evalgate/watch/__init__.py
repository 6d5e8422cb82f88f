"""``evalgate watch``: evaluate a training run's checkpoints as they land, re-read its log, and stop it when it
breaks. Import from the module that owns a name (nothing is re-exported, so the callback's ``files`` stays light):

- ``files``: the queue, log and STOP file names shared with ``evalgate.training.callback``; ``read_queue``,
  ``write_stop``;
- ``detect``: checkpoint states, settling (complete per ``checkpoints.layout`` and unchanged), progress, log source;
- ``loop``: ``WatchOptions``, ``Watcher`` (the loop, evaluation, STOP decisions), ``watch_locks``;
- ``status``: the status page and its chart.
"""
