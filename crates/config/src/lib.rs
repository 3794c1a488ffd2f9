//! placeholder
pub mod vocab;
