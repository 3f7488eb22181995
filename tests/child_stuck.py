"""A module whose import never ends, as a child process stuck starting does (libtpu
retrying to create its threads on a host out of them): tests/test_targets.py starts an
isolated.InChild of it."""

import time

time.sleep(3600)
