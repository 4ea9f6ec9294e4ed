"""Dynamic context layers, one module each, every one returning Blocks (SPEC D2)."""
