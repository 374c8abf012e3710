//! The billing connector.
pub mod model;
pub mod store;
