//! placeholder until this stage is written
