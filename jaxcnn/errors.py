"""The errors jaxcnn raises for things a user can fix.

The CLI turns each into one line on stderr and exit code 2; library users catch them
by class. Anything else escaping the library is a bug.
"""


class JaxcnnError(Exception):
    """Base class: a problem with what was asked, not with jaxcnn itself."""


class UsageError(JaxcnnError, ValueError):
    """An unknown name, an impossible size, a device that is not there."""


class DataError(JaxcnnError):
    """A dataset that cannot be found, read or trusted."""
