"""The Debug Adapter Protocol side of the engine: its wire format (``framing``) and the debug
service both front ends drive (the Studio through its engine host, editors through ``nac dap``)."""
