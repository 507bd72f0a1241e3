"""The one error type of `solver channel`."""


class ChannelError(Exception):
    """A problem the user can fix; the message names it and the fix."""
