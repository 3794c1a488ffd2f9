//! Behaviour of the built-in formats and the generation driver, through the public API and
//! the `posix` engine. One test binary, one module per topic.

mod common;
mod corrupt;
mod generate;
mod ndarray_npy;
mod numpy;
mod python_formats;
mod roundtrip;
mod synthetic;
