//! Behaviour tests for dlio-metrics: one binary, one module per topic.

mod suite;
