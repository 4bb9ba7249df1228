//! Fixed-point kernels for the transcendental functions.
