//! The runtime of [Fusion](https://docs.rs/fusion): registry, request pipeline, envelope,
//! errors, state sync and the in-memory tester, on top of [`rmcp`].
//!
//! Users depend on the `fusion` crate, which re-exports this one together with the macros.
//! Everything here works without the macros: `#[model]`, `#[presenter]` and `#[tool]` only
//! generate calls into this crate.

pub mod access;
pub mod args;
pub mod audit;
pub mod auth;
pub mod context;
mod envelope;
pub mod error;
mod explain;
pub mod guard;
pub mod hidden;
pub mod key;
pub mod middleware;
pub mod model;
pub mod observe;
pub mod present;
mod registry;
mod schema;
pub mod serve;
pub mod testing;
pub mod tool;
pub mod xml;

pub use access::AccessPolicy;
pub use args::Params;
pub use audit::{AuditRecord, AuditSink};
pub use auth::Principal;
pub use context::{CallContext, Ext, FromContext, HttpRequest, Progress, ServerParts, State};
pub use error::{BuildError, ToolError, codes};
pub use guard::{Concurrency, Serialization};
pub use hidden::Hidden;
pub use key::{Glob, ToolKey};
pub use middleware::{Middleware, Router};
pub use model::{ArgumentGroup, Create, FieldInfo, Fillable, Filter, Model, ModelFields, Update};
pub use observe::Metrics;
pub use present::{
    Nested, NestedPresenter, Plain, Presentation, Presented, PresentedValue, Presenter,
    PresenterInfo, PresenterOf, Suggestion, ToolOutput, Truncation, UiBlock,
};
pub use registry::{ActionInfo, Exposition, Server, ServerBuilder, ToolInfo, UnknownTool};
pub use tool::{CacheHint, ErrorCatalog, Tool, ToolSpec, Verb};

pub use rmcp;
