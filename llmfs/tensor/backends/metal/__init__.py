"""Metal backend and its CPU emulator (see the submodules)."""
