"""A loopback-only network namespace for the tests' servers and sites (gpukit's, which the lessons use), and
where a process's servers listen.

gpukit.topics.distributed.loopback_namespace makes the command prefix (and says why where it cannot); this
module keeps the name the test support modules import it by. :func:`listening_addresses` lets a test see that
the lessons' clusters listen on the loopback address only.
"""

from gpukit.topics.distributed import loopback_namespace as loopback_namespace_prefix

__all__ = ["listening_addresses", "loopback_namespace_prefix"]


def listening_addresses(pid: int | None = None) -> set[str]:
    """The IP addresses on which process ``pid`` (default: this one) and all its descendants listen (TCP)."""
    import psutil

    root = psutil.Process(pid)
    addresses = set()
    for process in (root, *root.children(recursive=True)):
        try:
            connections = (process.net_connections(kind="tcp") if hasattr(process, "net_connections")
                           else process.connections(kind="tcp"))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        addresses.update(c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN)
    return addresses
