"""Trust: prove a distribution is the bytes its publisher released, before any of it runs."""
