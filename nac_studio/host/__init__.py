"""The engine host: engine work in a process of its own beside the Studio's window.

``client`` (Qt, in the GUI process) starts it, sends requests and turns responses and events into
signals; ``server`` (Qt-free, in the host process) runs them; ``arrays`` carries large arrays
between the two through files in shared memory. ``python -m nac_studio.host`` is the host's entry.
The protocol is described in ARCHITECTURE.md ("The engine host")."""

#: Bumped when a request, a response body or an event changes shape; the host says its version in
#: the ``initialize`` response and the client refuses a host that speaks another one.
PROTOCOL_VERSION = 1
