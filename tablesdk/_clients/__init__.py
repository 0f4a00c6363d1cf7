"""Operations: every operation as an I/O-free flow, the sync client that runs them, service-level XML."""
